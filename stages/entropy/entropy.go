// Package entropy holds Trinity-RFT's entropy loss functions (default, mix,
// none): the aggregate of the per-token policy entropy times entropy_coef,
// with its gradient with respect to the entropy input. The trainer subtracts
// it from the policy loss (an entropy bonus).
package entropy

import (
	"fmt"
	"sync"

	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/registry"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// Kind is an entropy loss function.
type Kind int

// The entropy loss functions.
const (
	Default Kind = iota // aggregate over every row
	Mix                 // aggregate over the usual rows (expert_mask false) only
	None                // 0, no metrics
)

// schemaOf is every function's argument schema: entropy_coef has no
// constructor default (required in a user dict); default_args gives 0.
var schemaOf = args.Schema{{Name: "entropy_coef", Kind: args.Float, Default: 0.0, InDefaults: true,
	Doc: "entropy coefficient"}}

// Family returns the entropy functions as a registry.Family.
func Family() registry.Family {
	return Registry().Family(func(Kind) registry.Entry { return registry.Entry{Params: schemaOf} })
}

// Registry returns the entropy loss registry, built once.
var Registry = sync.OnceValue(func() *registry.Registry[Kind] {
	return registry.Of("entropy loss function", map[string]Kind{"default": Default, "mix": Mix, "none": None})
})

// Fn is a configured entropy loss function.
type Fn struct {
	Name string
	Kind Kind
	Coef float64
}

// New configures an entropy loss function from user arguments (nil: default_args).
func New(name string, user args.Values) (*Fn, error) {
	k, err := Registry().Get(name)
	if err != nil {
		return nil, err
	}
	v, err := schemaOf.Resolve(user)
	if err != nil {
		return nil, fmt.Errorf("entropy loss %s: %w", name, err)
	}
	return &Fn{Name: name, Kind: k, Coef: v.Float("entropy_coef")}, nil
}

// Kernel is the per-token kernel of the entropy loss: L = entropy, gradient
// w.r.t. the entropy input. Sums: Σ c·m·entropy.
type Kernel struct{}

// Sums implements tokens.Kernel.
func (Kernel) Sums() int { return 1 }

// Row implements tokens.Kernel.
func (Kernel) Row(r *tokens.Row, s []float64) {
	ent := r.Entropy
	n := len(ent)
	m, grad := r.Mask[:n], r.Grad[:n]
	sum := 0.0
	for t, x := range ent {
		mt := m[t]
		if mt == 0 {
			grad[t] = 0
			continue
		}
		sum += x * mt
		grad[t] = r.GradScale * mt
	}
	s[0] += r.Scale * sum
}

// Loss returns aggregate(entropy, action_mask, mode)·entropy_coef and writes
// its gradient w.r.t. entropy into grad (0 on expert rows for mix). mix needs
// expert_mask; with no usual rows it gives 0 (token-mean) or NaN (seq-mean
// modes), as upstream. none gives 0, no metrics and a zero gradient.
func (f *Fn) Loss(b *tokens.Batch, mode agg.Mode, grad []float64) (float64, agg.Metrics, error) {
	return f.LossOn(tokens.CPU, b, mode, grad)
}
