// Package algorithm holds Trinity-RFT's algorithm types
// as presets: per type its constant flags, its
// default_config() and its check_config rules, and the configuration
// resolution of upstream's config validator (spec README §Registries and
// configuration resolution): algorithm defaults, then the user's values, then
// every null *_args becomes the component's default_args().
//
// An algorithm names components — sample strategy, advantage fn, KL penalty
// fn, policy loss fn, KL loss fn, entropy loss fn — that live in their own
// registries (stages/advantage, stages/loss, …); this package only resolves
// which ones and with which arguments. Sample strategies are registered
// here: they assemble trainer batches and have no stage of their own.
package algorithm

import (
	"sync"

	"github.com/rftpipe/rftpipe/stages/registry"
)

// Schema is the kind of training data an algorithm consumes.
type Schema string

// Schemas.
const (
	Experience Schema = "experience" // rollouts
	SFT        Schema = "sft"        // prompt + reference answer
	DPO        Schema = "dpo"        // prompt + chosen/rejected answers
)

// Flags are the constant class attributes of an algorithm type.
type Flags struct {
	// UseCritic: the trainer runs a value model (a values column exists).
	UseCritic bool `json:"use_critic"`
	// UseReference: the trainer computes ref_log_prob with the reference model.
	UseReference bool `json:"use_reference"`
	// ComputeAdvantageInTrainer: the KL penalty and a trainer-side advantage
	// fn run on the trainer batch; false: the advantage fn, if any, is the
	// last experience-pipeline operator.
	ComputeAdvantageInTrainer bool `json:"compute_advantage_in_trainer"`
	// CanBalanceBatch: the trainer may reorder rows across data-parallel
	// ranks (false for DPO, whose chosen/rejected rows must stay adjacent).
	CanBalanceBatch bool `json:"can_balance_batch"`
	// Schema is the kind of training data.
	Schema Schema `json:"schema"`
	// UseRollout is informational, set on mix and mix_chord only.
	UseRollout bool `json:"use_rollout,omitempty"`
}

// Type is one registered algorithm type. Its fields are unexported and every
// accessor returns a copy: flags and defaults are constants, as upstream's
// ConstantMeta makes them.
type Type struct {
	name     string
	class    string
	doc      string
	flags    Flags
	defaults Config
	// checkEnv and mutate are check_config, split into the rules that look at
	// the job (mode, input store) and the ones that rewrite the config.
	checkEnv func(t *Type, env *Env) error
	mutate   func(c *Config, warn func(string))
}

// Name returns the registry name (algorithm_type).
func (t *Type) Name() string { return t.name }

// Class returns the upstream class name.
func (t *Type) Class() string { return t.class }

// Doc returns a one-line description.
func (t *Type) Doc() string { return t.doc }

// Flags returns the constant flags.
func (t *Type) Flags() Flags { return t.flags }

// DefaultConfig returns upstream's default_config(): only the keys it lists
// are set (empty strings, nil args and repeat_times 0 mean "not listed").
func (t *Type) DefaultConfig() Config { return t.defaults.clone() }

// Spec is one registered algorithm type: its name, its description and
// the type (a preset, the constructor of resolved configs).
type Spec = registry.Spec[*Type]

// Registry maps algorithm_type names to Specs.
type Registry = registry.Registry[*Type]

// Default returns the registry of the built-in algorithm types, built once.
var Default = sync.OnceValue(func() *Registry {
	var specs []Spec
	for _, t := range builtins() {
		specs = append(specs, Spec{Name: t.name, Doc: t.doc, New: t})
	}
	return registry.Must("algorithm type", specs...)
})
