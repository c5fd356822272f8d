// Package addstrategy provides the six add strategies of Trinity-RFT's
// removed add_strategy package (seed
// 002_61299772bf4a6130) as named presets over the stages of package
// advantage: grpo, opmd, step_wise_grpo, reward_variance, correct_bias,
// duplicate_informative.
//
// An upstream strategy wrote the surviving rows through a writer and returned
// (count, metrics). Here a Strategy is an advantage.PipelineFn: its Plan says
// which rows are written, with which scores (nil for the strategies that
// compute no advantage), and the metrics the strategy reported; Writes splits
// the output into upstream's writer calls (one per group, one per run, or one
// in all). Presets have their own Registry; args, defaults and validation
// work as for the advantage fns.
package addstrategy

import (
	"strings"
	"sync"
	"time"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/advantage"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/registry"
)

// writeUnit is how a strategy split its writes.
type writeUnit int

const (
	perGroup writeUnit = iota // one write per non-empty task group
	perRun                    // one write per run (step_wise_grpo)
	single                    // one write of every row (duplicate_informative)
)

// Strategy is a configured add strategy.
type Strategy struct {
	stage advantage.PipelineFn
	unit  writeUnit
	// groupMetrics keeps the group_advantages/* metrics (the other keys are
	// today's additions); false reports none (opmd, Q-37).
	groupMetrics bool
	// timed reports add_strategy_time (wall-clock seconds of the filtering).
	timed bool
	// refill appends copies of kept groups until the input row count is
	// reached (duplicate_informative).
	refill bool
}

// Plan implements advantage.PipelineFn: the rows the strategy writes, in
// upstream's order, and the metrics it returned. The written count is
// len(Plan.Output()).
func (s *Strategy) Plan(in *advantage.Input) (*advantage.Plan, error) {
	start := time.Now()
	p, err := s.stage.Plan(in)
	if err != nil {
		return nil, err
	}
	metrics, weights := agg.Metrics{}, agg.Metrics{}
	if s.timed {
		metrics["add_strategy_time"] = time.Since(start).Seconds()
	}
	if s.refill {
		advantage.RefillRows(p, in.N(), advantage.NewRNG(in.Seed))
	}
	for k, v := range p.Metrics {
		if s.groupMetrics && strings.HasPrefix(k, "group_advantages/") {
			metrics[k] = v
			if w, ok := p.Weights[k]; ok {
				weights[k] = w
			}
		}
	}
	p.Metrics, p.Weights = metrics, weights
	return p, nil
}

// Writes splits the output of p (a plan of this strategy over in) into
// upstream's writer calls, in order. Empty writes are left out.
func (s *Strategy) Writes(p *advantage.Plan, in *advantage.Input) [][]advantage.OutRow {
	out := p.Output()
	if s.unit == single {
		if len(out) == 0 {
			return nil
		}
		return [][]advantage.OutRow{out}
	}
	// Output rows of one group (or run) are contiguous: split where the
	// group (or run) id changes.
	id := p.Groups.IDOf(in.N())
	if s.unit == perRun {
		id = in.Runs.IDOf(in.N())
	}
	var writes [][]advantage.OutRow
	for i := 0; i < len(out); {
		j := i + 1
		for j < len(out) && id[out[j].Row] == id[out[i].Row] && out[j].Dup == out[i].Dup {
			j++
		}
		writes = append(writes, out[i:j])
		i = j
	}
	return writes
}

// Constructor builds a configured strategy from its resolved args.
type Constructor func(a args.Values) (*Strategy, error)

// Spec describes one add strategy: its name, args and constructor.
type Spec = registry.Spec[Constructor]

// Registry maps add strategy names to Specs.
type Registry = registry.Registry[Constructor]

// Default returns the registry of the six add strategies, built once.
var Default = sync.OnceValue(func() *Registry {
	return registry.Must("add strategy",
		grpoSpec(), opmdSpec(), stepWiseGRPOSpec(), rewardVarianceSpec(), correctBiasSpec(), duplicateInformativeSpec())
})

// New builds add strategy name of reg with args (nil: default_args()).
func New(reg *Registry, name string, user map[string]any) (*Strategy, error) {
	s, err := reg.Get(name)
	if err != nil {
		return nil, err
	}
	a, err := s.Params.Resolve(user)
	if err != nil {
		return nil, schema.BadInputf("add strategy %s: %v", name, err)
	}
	return s.New(a)
}

// param declares an arg whose constructor default is also its default_args() value.
func param(name string, kind args.Kind, def any, doc string) args.Param {
	return args.Param{Name: name, Kind: kind, Ctor: def, Default: def, InDefaults: true, Doc: doc}
}

var (
	paramEpsilon  = param("epsilon", args.Float, 1e-6, "added to the std in the denominator")
	paramVariance = param("variance_threshold", args.Float, 0.0,
		"drop groups with < 2 rows or population reward variance <= threshold")
)

// Needs implements advantage.Needer: what the strategy's stage reads.
func (s *Strategy) Needs() advantage.Needs { return advantage.NeedsOf(s.stage) }

// CrossBatch implements advantage.CrossBatcher: the refill draws from the
// kept groups of the whole input; otherwise the stage's own reason.
func (s *Strategy) CrossBatch() string {
	if s.refill {
		return "the refill copies kept groups of the whole input until it has as many rows"
	}
	return advantage.CrossBatchOf(s.stage)
}
