package loss

import (
	"sync"

	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/registry"
)

// Registry maps policy loss names to their definitions.
type Registry struct {
	r *registry.Registry[*Def]
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{r: registry.New[*Def]("policy loss")} }

// Add registers a definition under its name; a name registered twice is an error.
func (r *Registry) Add(d *Def) error { return r.r.Add(d.Name, d) }

// Get returns the definition of a loss; an unknown name is an error wrapping
// schema.ErrBadInput that lists the registered names.
func (r *Registry) Get(name string) (*Def, error) { return r.r.Get(name) }

// Names returns the registered names, sorted.
func (r *Registry) Names() []string { return r.r.Names() }

// Family returns the registry as a registry.Family (every loss's schema has
// backend first).
func (r *Registry) Family() registry.Family {
	return r.r.Family(func(d *Def) registry.Entry { return registry.Entry{Params: d.Schema()} })
}

// New looks a loss up and configures it with user arguments (nil:
// default_args), see Def.New.
func (r *Registry) New(name string, user args.Values) (*Loss, error) {
	d, err := r.Get(name)
	if err != nil {
		return nil, err
	}
	return d.New(user)
}

// RegisterPolicyLosses adds the 15 upstream policy losses of Trinity-RFT,
// the 0.6 line's m2po, and verl's gpg, geo_mean, reinforce, bypass_mode,
// dppo_tv, dppo_kl, clip_cov, kl_cov and dro to r. This is the one place to add a loss.
func RegisterPolicyLosses(r *Registry) error {
	for _, d := range []*Def{
		ppoDef(), opmdDef(), dpoDef(), sftDef(), mixDef(), gspoDef(), toprDef(), cispoDef(),
		sftISDef(), sftPhiDef(), mixChordDef(), sppoDef(), recDef(), sapoDef(), isDef(),
		gpgDef(), geoMeanDef(), reinforceDef(), bypassDef(), m2poDef(),
		dppoDef("dppo_tv", false), dppoDef("dppo_kl", true), clipCovDef(), klCovDef(), droDef(),
	} {
		if err := r.Add(d); err != nil {
			return err
		}
	}
	return nil
}

var (
	defaultOnce sync.Once
	defaultReg  *Registry
)

// Default returns the registry of the upstream losses, built once.
func Default() *Registry {
	defaultOnce.Do(func() {
		defaultReg = NewRegistry()
		if err := RegisterPolicyLosses(defaultReg); err != nil {
			panic(err) // a duplicate name in the list above: a programming error
		}
	})
	return defaultReg
}
