package build

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/loss"
	"github.com/rftpipe/rftpipe/stages/objective"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// idColumns are copied from the input into a loss's gradient file when
// present.
var idColumns = []string{schema.Batch, schema.Task, schema.Run, schema.Step, schema.Suffix}

// FlagObjective configures the objective of `loss --fn`: the policy loss
// Fn with Args (and Seed as its seed argument, for clip_cov's random
// choice), LossAggMode, the KL and the entropy terms.
func FlagObjective(o *Options) (*objective.Objective, error) {
	if o.Fn == "" {
		return nil, usagef("give --fn, --algorithm or --config")
	}
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
			return nil, usagef("--seed: policy loss %s draws nothing at random", spec.Name)
		}
		if _, set := user["seed"]; !set {
			if o.Seed > math.MaxInt64 {
				return nil, usagef("--seed %d: at most %d", o.Seed, int64(math.MaxInt64))
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

// PolicyObjective is the objective of the policy loss name alone, with its
// default arguments (`bench loss`).
func PolicyObjective(name string) (*objective.Objective, error) { return objective.PolicyOnly(name) }

// colMap parses --col INPUT=COLUMN (verl names of the inputs accepted).
func colMap(kvs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range kvs {
		in, col, ok := strings.Cut(kv, "=")
		in = tokens.Canonical(in)
		if !ok || !isInput(in) || col == "" {
			return nil, usagef("--col %q: want CANONICAL=COLUMN with CANONICAL one of logprob, old_logprob, ref_logprob, advantages, action_mask, expert_mask, teacher_logprob, entropy, values", kv)
		}
		out[in] = col
	}
	return out, nil
}

// isInput reports whether in is a canonical input of the stages.
func isInput(in string) bool {
	return slices.ContainsFunc(schema.Inputs, func(d schema.InputColumns) bool { return d.Input == in })
}
