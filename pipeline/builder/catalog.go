package builder

import (
	"fmt"
	"strings"

	"github.com/rftpipe/rftpipe/pipeline/algorithm"
	"github.com/rftpipe/rftpipe/pipeline/golden"
	"github.com/rftpipe/rftpipe/pipeline/shard"
	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/addstrategy"
	"github.com/rftpipe/rftpipe/stages/advantage"
	"github.com/rftpipe/rftpipe/stages/entropy"
	"github.com/rftpipe/rftpipe/stages/kl"
	"github.com/rftpipe/rftpipe/stages/loss"
	"github.com/rftpipe/rftpipe/stages/operator"
	"github.com/rftpipe/rftpipe/stages/registry"
	"github.com/rftpipe/rftpipe/stages/rollout"
)

// Family is a registry of named components a job is built from.
type Family int

// The families.
const (
	AdvantageFns Family = iota
	AddStrategies
	PolicyLosses
	KLFns
	EntropyFns
	RolloutOptions
	SampleStrategies
	Algorithms
	Operators
	ConformanceKinds
)

// registryOf returns family f's registry, seen the one way every family is
// (registry.Family).
func registryOf(f Family) registry.Family {
	switch f {
	case AdvantageFns:
		return advantage.Default()
	case AddStrategies:
		return addstrategy.Default()
	case PolicyLosses:
		return loss.Default()
	case KLFns:
		return kl.Registry()
	case EntropyFns:
		return entropy.Registry()
	case RolloutOptions:
		return rollout.Options()
	case SampleStrategies:
		return algorithm.SampleStrategies()
	case Operators:
		return operator.Default()
	case ConformanceKinds:
		return golden.Kinds()
	}
	return algorithm.Default()
}

// Entries returns the entries (name, doc, parameters) of a family, sorted
// by name.
func Entries(f Family) []registry.Entry { return registryOf(f).Entries() }

// Names returns the names of a family's components, sorted, for help texts.
func Names(f Family) []string { return registryOf(f).Names() }

// AdvantageHelp lists the advantage fns with their arguments and defaults
// (upstream's default_args(); "-" for an argument left to the
// constructor), pipeline-side ones first.
func AdvantageHelp() string {
	var b strings.Builder
	reg := advantage.Default()
	for _, side := range []advantage.Side{advantage.PipelineSide, advantage.TrainerSide} {
		if side == advantage.PipelineSide {
			b.WriteString("pipeline-side advantage fns and filters (run on the experiences, as Trinity's experience pipeline):\n")
		} else {
			b.WriteString("trainer-side advantage fns (run over the store as one trainer batch, after the KL penalty of an\n" +
				"algorithm job; they read the trainer's columns, e.g. ppo reads values):\n")
		}
		for _, n := range reg.Names() {
			spec, _ := reg.Get(n)
			if spec.New.Side() != side {
				continue
			}
			var args []string
			def := spec.Defaults()
			for _, p := range spec.Params {
				v, ok := def[p.Name]
				if !ok {
					v = p.Ctor
				}
				if v == nil {
					v = "-"
				}
				args = append(args, fmt.Sprintf("%s=%v", p.Name, v))
			}
			fmt.Fprintf(&b, "  %-22s %s\n", n, strings.Join(args, " "))
		}
	}
	return b.String()
}

// AlgorithmDoc is one algorithm type as `rftpipe algorithms` shows it; its
// JSON form (name, flags, default_config) is what scripts rely on.
type AlgorithmDoc struct {
	Name string `json:"name"`
	algorithm.Flags
	DefaultConfig algorithm.Config `json:"default_config"`
	// Class and Doc are upstream's class name and the description.
	Class string `json:"-"`
	Doc   string `json:"-"`
	// Components are the default config's component slots, in order.
	Components []Component `json:"-"`
}

// Component is one slot of an algorithm's config: its key, the component
// and its arguments (nil when none).
type Component struct {
	Key, Fn string
	Args    map[string]any
}

// SlotKeys are the component slots' keys, in the order Components lists
// them.
func SlotKeys() []string {
	keys := make([]string, len(algorithm.Slots))
	for i, s := range algorithm.Slots {
		keys[i] = s.Key()
	}
	return keys
}

// Algorithm documents the algorithm type name with its resolved default
// config.
func Algorithm(name string) (AlgorithmDoc, error) {
	res, err := algorithm.Resolve(algorithm.Config{AlgorithmType: name}, nil, algorithm.Options{})
	if err != nil {
		return AlgorithmDoc{}, err
	}
	d := AlgorithmDoc{Name: name, Flags: res.Type.Flags(), DefaultConfig: res.Config, Class: res.Type.Class(), Doc: res.Type.Doc()}
	for _, s := range algorithm.Slots {
		d.Components = append(d.Components, Component{Key: s.Key(), Fn: res.Config.Fn(s), Args: res.Config.Args(s)})
	}
	return d, nil
}

// The valid ranges of --shards and --shard.
var (
	ShardsRange = schema.Range(fmt.Sprintf("[1,%d]", shard.MaxShards))
	ShardRange  = schema.Range(fmt.Sprintf("[0,%d]", shard.MaxShards-1))
)
