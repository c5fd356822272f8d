package advantage

import (
	"sync"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/registry"
)

// PipelineFn is a configured pipeline-side fn (or filter): scalars in, Plan out.
type PipelineFn interface {
	Plan(in *Input) (*Plan, error)
}

// TrainerFn is a configured trainer-side fn over a ragged token batch.
type TrainerFn interface {
	Compute(b *TokenBatch) (*TokenResult, error)
	// Stream returns a fresh streamed form of the fn, for a batch handed
	// over in windows of rows.
	Stream() Streamed
	// Inputs lists the TokenBatch inputs the fn reads besides the mask
	// (In… names).
	Inputs() []string
}

// The inputs of trainer-side fns, under verl's names (TrainerFn.Inputs):
// those of schema's inputs (their Verl names), and the trainer's own.
var (
	InValues          = schema.InValues.Verl()
	InOldLogprobs     = schema.InOldLogprob.Verl()
	InTeacherLogprobs = schema.InTeacherLogprob.Verl()
	InEntropys        = schema.InEntropy.Verl()
	// InResponseMask is the mask every fn reads (TokenBatch.Mask).
	InResponseMask = schema.InActionMask.Verl()
)

// The trainer's own inputs, which no schema.Input is.
const (
	InTokenLevelRewards = "token_level_rewards"
	InRolloutLogprobs   = schema.VerlRolloutLogprobs
	InNecs              = "necs"
	InRewardBaselines   = "reward_baselines"
	// InGroups is the uid grouping (Chunk.Group in a streamed batch).
	InGroups = "uid"
)

// Side says where a fn runs.
type Side int

// Sides.
const (
	// PipelineSide fns run on the experience list ("in the explorer").
	PipelineSide Side = iota
	// TrainerSide fns run on the padded trainer batch.
	TrainerSide
)

// String returns "pipeline" or "trainer".
func (s Side) String() string { return [...]string{"pipeline", "trainer"}[s] }

// Constructor builds a configured fn from its resolved args: a
// PipelineCtor or a TrainerCtor, whose type says where the fn runs.
type Constructor interface {
	// Side returns where the fns built run.
	Side() Side
}

// PipelineCtor builds a pipeline-side fn (or filter).
type PipelineCtor func(a args.Values) (PipelineFn, error)

// TrainerCtor builds a trainer-side fn.
type TrainerCtor func(a args.Values) (TrainerFn, error)

// Side implements Constructor.
func (PipelineCtor) Side() Side { return PipelineSide }

// Side implements Constructor.
func (TrainerCtor) Side() Side { return TrainerSide }

// Spec describes one registered fn: its name, its args (with upstream's
// constructor and default_args() defaults) and its constructor.
type Spec = registry.Spec[Constructor]

// Registry maps fn names to Specs.
type Registry = registry.Registry[Constructor]

// Default returns the registry of every built-in fn and filter, built once.
var Default = sync.OnceValue(func() *Registry {
	return registry.Must("advantage fn",
		// pipeline side
		grpoSpec(), stepWiseGRPOSpec(), opmdSpec(), asymreSpec(), recSpec(), reinforceSpec(),
		gigpoSpec(), gdpoSpec(), codSpec(),
		// trainer side
		ppoSpec(), grpoVerlSpec(), reinforcePlusPlusSpec(), remaxSpec(), rlooSpec(),
		opmdVerlSpec(), asymreVerlSpec(), onPolicyDistillSpec(), jsdSpec(), clipBSpec(), clipVSpec(),
		// experience filters (pipeline side, no advantage)
		rewardStdFilterSpec(), invalidRewardFilterSpec())
})

// Pipeline builds the pipeline-side fn name of reg with args (nil:
// default_args()). A trainer-side name is an error, worded as upstream's
// pipeline check.
func Pipeline(reg *Registry, name string, user map[string]any) (PipelineFn, error) {
	s, err := reg.Get(name)
	if err != nil {
		return nil, err
	}
	ctor, ok := s.New.(PipelineCtor)
	if !ok {
		return nil, schema.BadInputf("AdvantageFn %s can only be computed in the trainer, please check your implementation.", name)
	}
	a, err := Resolve(name, s.Params, user)
	if err != nil {
		return nil, err
	}
	return ctor(a)
}

// Trainer builds the trainer-side fn name of reg with args (nil:
// default_args()).
func Trainer(reg *Registry, name string, user map[string]any) (TrainerFn, error) {
	s, err := reg.Get(name)
	if err != nil {
		return nil, err
	}
	ctor, ok := s.New.(TrainerCtor)
	if !ok {
		return nil, schema.BadInputf("advantage fn %s runs in the pipeline, not in the trainer", name)
	}
	a, err := Resolve(name, s.Params, user)
	if err != nil {
		return nil, err
	}
	return ctor(a)
}
