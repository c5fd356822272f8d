package algorithm

import (
	"bytes"
	"encoding/json"
	"maps"
)

// Slot is one component slot of an algorithm config.
type Slot int

// The component slots, in Trinity's config order.
const (
	SampleStrategy Slot = iota
	AdvantageFn
	KLPenaltyFn
	PolicyLossFn
	KLLossFn
	EntropyLossFn
	numSlots
)

// Slots lists every slot in order.
var Slots = []Slot{SampleStrategy, AdvantageFn, KLPenaltyFn, PolicyLossFn, KLLossFn, EntropyLossFn}

var slotKeys = [numSlots]string{"sample_strategy", "advantage_fn", "kl_penalty_fn", "policy_loss_fn", "kl_loss_fn", "entropy_loss_fn"}

// Key returns the config key of the slot's name ("policy_loss_fn"); its
// arguments are under Key()+"_args".
func (s Slot) Key() string { return slotKeys[s] }

// ArgsKey returns the config key of the slot's arguments ("policy_loss_fn_args").
func (s Slot) ArgsKey() string { return slotKeys[s] + "_args" }

func (s Slot) String() string { return s.Key() }

// Args is an argument dict as written in a config: values are float64,
// int64, bool, string, nil or nested maps/lists. A nil Args is null.
type Args = map[string]any

// Component is a named component and its arguments (nil: null).
type Component struct {
	Name string
	Args Args
}

// Config is Trinity-RFT's algorithm config section. Empty strings, nil
// argument dicts and RepeatTimes 0 are null (unset); Resolve fills them.
type Config struct {
	AlgorithmType string
	RepeatTimes   int
	Components    [numSlots]Component
	LossAggMode   string
	// NoBypassOldLogprobs is bypass_old_logprobs: false (default true: the
	// trainer takes the rollout log-probs as old_log_probs instead of
	// recomputing them). rftpipe computes no log-probs; m2po refuses false.
	NoBypassOldLogprobs bool
}

// Fn returns the component name in slot s.
func (c Config) Fn(s Slot) string { return c.Components[s].Name }

// Args returns the argument dict of slot s (nil: null).
func (c Config) Args(s Slot) Args { return c.Components[s].Args }

// Set sets the component of slot s.
func (c *Config) Set(s Slot, name string, args Args) { c.Components[s] = Component{name, args} }

// clone returns a deep copy of the argument dicts' top level.
func (c Config) clone() Config {
	for i := range c.Components {
		if c.Components[i].Args != nil {
			c.Components[i].Args = maps.Clone(c.Components[i].Args)
		}
	}
	return c
}

// MarshalJSON writes the config with Trinity's keys in Trinity's order;
// unset values are null.
func (c Config) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	field := func(key string, v any) error {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(key)
		b.Write(k)
		b.WriteByte(':')
		raw, err := json.Marshal(v)
		if err != nil {
			return err
		}
		b.Write(raw)
		return nil
	}
	str := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	var rt any
	if c.RepeatTimes != 0 {
		rt = c.RepeatTimes
	}
	if err := field("algorithm_type", str(c.AlgorithmType)); err != nil {
		return nil, err
	}
	if err := field("repeat_times", rt); err != nil {
		return nil, err
	}
	for _, s := range Slots {
		if err := field(s.Key(), str(c.Fn(s))); err != nil {
			return nil, err
		}
		if err := field(s.ArgsKey(), c.Args(s)); err != nil {
			return nil, err
		}
	}
	if err := field("loss_agg_mode", str(c.LossAggMode)); err != nil {
		return nil, err
	}
	if c.NoBypassOldLogprobs {
		if err := field("bypass_old_logprobs", false); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
