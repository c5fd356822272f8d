package advantage

import (
	"fmt"
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

// Spec describes one registered fn: its name, its args (with upstream's
// constructor and default_args() defaults) and its constructor. Exactly one
// of NewPipeline and NewTrainer is set.
type Spec struct {
	Name        string
	Doc         string
	Params      args.Schema
	NewPipeline func(a args.Values) (PipelineFn, error)
	NewTrainer  func(a args.Values) (TrainerFn, error)
}

// Side returns where the fn runs.
func (s *Spec) Side() Side {
	if s.NewTrainer != nil {
		return TrainerSide
	}
	return PipelineSide
}

// Defaults returns upstream's default_args() (a fresh map).
func (s *Spec) Defaults() args.Values { return s.Params.Defaults() }

// Registry maps fn names to Specs (a stages/registry table). Build one with
// NewRegistry and explicit Register… calls, or use Default.
type Registry struct {
	r *registry.Registry[*Spec]
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{r: registry.New[*Spec]("advantage fn")} }

// Add registers s; a duplicate name or a spec without exactly one
// constructor is an error.
func (r *Registry) Add(s Spec) error {
	if (s.NewPipeline == nil) == (s.NewTrainer == nil) {
		return fmt.Errorf("advantage: spec %q needs exactly one of NewPipeline, NewTrainer", s.Name)
	}
	return r.r.Add(s.Name, &s)
}

// Get returns the spec of name; an unknown name is an error wrapping
// schema.ErrBadInput that lists the registered names.
func (r *Registry) Get(name string) (*Spec, error) { return r.r.Get(name) }

// Names returns the registered names, sorted.
func (r *Registry) Names() []string { return r.r.Names() }

// Family returns the registry as a registry.Family.
func (r *Registry) Family() registry.Family {
	return r.r.Family(func(s *Spec) registry.Entry { return registry.Entry{Doc: s.Doc, Params: s.Params} })
}

// Pipeline builds the pipeline-side fn name with args (nil: default_args()).
// A trainer-side name is an error, worded as upstream's pipeline check.
func (r *Registry) Pipeline(name string, user map[string]any) (PipelineFn, error) {
	s, err := r.Get(name)
	if err != nil {
		return nil, err
	}
	if s.NewPipeline == nil {
		return nil, schema.BadInputf("AdvantageFn %s can only be computed in the trainer, please check your implementation.", name)
	}
	a, err := Resolve(name, s.Params, user)
	if err != nil {
		return nil, err
	}
	return s.NewPipeline(a)
}

// Trainer builds the trainer-side fn name with args (nil: default_args()).
func (r *Registry) Trainer(name string, user map[string]any) (TrainerFn, error) {
	s, err := r.Get(name)
	if err != nil {
		return nil, err
	}
	if s.NewTrainer == nil {
		return nil, schema.BadInputf("advantage fn %s runs in the pipeline, not in the trainer", name)
	}
	a, err := Resolve(name, s.Params, user)
	if err != nil {
		return nil, err
	}
	return s.NewTrainer(a)
}

var (
	defaultOnce sync.Once
	defaultReg  *Registry
)

// Default returns the registry of every built-in fn and filter, built once.
func Default() *Registry {
	defaultOnce.Do(func() {
		r := NewRegistry()
		for _, register := range []func(*Registry) error{RegisterPipeline, RegisterTrainer, RegisterFilters} {
			if err := register(r); err != nil {
				panic(err) // built-in names are distinct; a clash is a programming error
			}
		}
		defaultReg = r
	})
	return defaultReg
}

// RegisterPipeline adds the pipeline-side advantage fns.
func RegisterPipeline(r *Registry) error {
	return addAll(r, grpoSpec(), stepWiseGRPOSpec(), opmdSpec(), asymreSpec(), recSpec(), reinforceSpec(),
		gigpoSpec(), gdpoSpec(), codSpec())
}

// RegisterTrainer adds the trainer-side advantage fns.
func RegisterTrainer(r *Registry) error {
	return addAll(r, ppoSpec(), grpoVerlSpec(), reinforcePlusPlusSpec(), remaxSpec(), rlooSpec(),
		opmdVerlSpec(), asymreVerlSpec(), onPolicyDistillSpec(), jsdSpec(), clipBSpec(), clipVSpec())
}

// RegisterFilters adds the experience filters (pipeline side, no advantage).
func RegisterFilters(r *Registry) error {
	return addAll(r, rewardStdFilterSpec(), invalidRewardFilterSpec())
}

func addAll(r *Registry, specs ...Spec) error {
	for _, s := range specs {
		if err := r.Add(s); err != nil {
			return err
		}
	}
	return nil
}
