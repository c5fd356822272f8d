package loss

import (
	"sync"

	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/registry"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// Spec describes one registered loss: its name, its argument schema
// (backend first) and its definition, the constructor of configured losses
// (Def.New, Def.FromConfig).
type Spec = registry.Spec[*Def]

// Registry maps policy loss names to their Specs.
type Registry = registry.Registry[*Def]

// Default returns the registry of the policy losses, built once: the 15
// upstream losses of Trinity-RFT, the 0.6 line's m2po, and verl's gpg,
// geo_mean, reinforce, bypass_mode, dppo_tv, dppo_kl, clip_cov, kl_cov and
// dro. This is the one place to add a loss.
var Default = sync.OnceValue(func() *Registry {
	var specs []Spec
	for _, d := range []*Def{
		ppoDef(), opmdDef(), dpoDef(), sftDef(), mixDef(), gspoDef(), toprDef(), cispoDef(),
		sftISDef(), sftPhiDef(), mixChordDef(), sppoDef(), recDef(), sapoDef(), isDef(),
		gpgDef(), geoMeanDef(), reinforceDef(), bypassDef(), m2poDef(),
		dppoDef("dppo_tv", false), dppoDef("dppo_kl", true), clipCovDef(), klCovDef(), droDef(),
	} {
		specs = append(specs, Spec{Name: d.Name, Params: d.Schema(), New: d})
	}
	return registry.Must("policy loss", specs...)
})

// New looks loss name up in reg and configures it with user arguments
// (nil: default_args), see Def.New.
func New(reg *Registry, name string, user args.Values) (*Loss, error) {
	s, err := reg.Get(name)
	if err != nil {
		return nil, err
	}
	return s.New.New(user)
}

// Eval configures loss name of reg with user arguments and evaluates it on
// the CPU: the loss value and metrics, the gradient written into grad.
func Eval(reg *Registry, name string, user args.Values, b *tokens.Batch, grad []float64) (float64, agg.Metrics, error) {
	l, err := New(reg, name, user)
	if err != nil {
		return 0, nil, err
	}
	res, err := l.Eval(b, grad)
	return res.Loss, res.Metrics, err
}
