package builder

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/loss"
	"github.com/rftpipe/rftpipe/stages/objective"
)

// idColumns are copied from the input into a loss's gradient file when
// present.
var idColumns = []string{schema.Batch, schema.Task, schema.Run, schema.Step, schema.Suffix}

// FlagObjective configures the objective of `loss --fn`: the policy loss
// Fn with Args (and Seed as its seed argument, for clip_cov's random
// choice), LossAggMode, the KL and the entropy terms.
func FlagObjective(o *LossOptions) (*objective.Objective, error) {
	spec, err := loss.Default().Get(o.Fn)
	if err != nil {
		return nil, err
	}
	user, err := spec.Params.ParseKV(o.Args)
	if err != nil {
		return nil, fmt.Errorf("policy loss %s: %w", spec.Name, err)
	}
	if o.HasSeed {
		if !slices.ContainsFunc(spec.Params, func(p args.Param) bool { return p.Name == "seed" }) {
			return nil, schema.Usagef("--seed: policy loss %s draws nothing at random", spec.Name)
		}
		if _, set := user["seed"]; !set {
			if o.Seed > math.MaxInt64 {
				return nil, schema.Usagef("--seed %d: at most %d", o.Seed, int64(math.MaxInt64))
			}
			user["seed"] = int64(o.Seed) // --arg seed=N wins
		}
	}
	return objective.New(objective.Config{
		PolicyLoss: spec.Name, Args: user, LossAggMode: o.LossAggMode,
		KLLoss: o.KLLossFn, KLCoef: o.KLCoef,
		Entropy: o.EntropyLossFn, EntropyCoef: o.EntropyCoef,
	})
}

// colMap parses --col INPUT=COLUMN (verl names of the inputs accepted).
func colMap(kvs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range kvs {
		in, col, ok := strings.Cut(kv, "=")
		si, known := schema.ParseInput(in)
		if !ok || !known || col == "" {
			return nil, schema.Usagef("--col %q: want CANONICAL=COLUMN with CANONICAL one of %s", kv, strings.Join(schema.InputNames(), ", "))
		}
		out[string(si)] = col
	}
	return out, nil
}
