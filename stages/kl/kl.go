// Package kl holds the KL functions of Trinity-RFT (none, k1, k2, k3,
// low_var_kl, abs, corrected_k3): per-token estimates with their derivative
// with respect to the policy log-prob, the KL loss added to the actor loss
// (with its gradient), the KL penalty applied to token-level rewards, and the
// fixed and adaptive coefficient controllers.
//
// The same function serves upstream's two config slots, kl_penalty_fn and
// kl_loss_fn; they are two independent Fn values (separate coefficients).
package kl

import (
	"fmt"
	"sync"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/internal/fastexp"
	"github.com/rftpipe/rftpipe/stages/internal/torch"
	"github.com/rftpipe/rftpipe/stages/registry"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// Kind is a per-token KL estimator.
type Kind int

// The estimators, in registry order.
const (
	None        Kind = iota // 0
	K1                      // lp - ref
	K2                      // ½(lp - ref)²
	K3                      // x = ref - lp: exp(x) - 1 - x
	LowVarKL                // k3 with x clamped to ±20 and the result to ±10
	Abs                     // |lp - ref|
	CorrectedK3             // k3 · clamp(exp(lp - old), 0, 2) when old is given
)

var kindNames = map[string]Kind{"none": None, "k1": K1, "k2": K2, "k3": K3, "low_var_kl": LowVarKL, "abs": Abs, "corrected_k3": CorrectedK3}

// DetachRatio is the opt-in argument of corrected_k3 fixing quirk Q-42.
const DetachRatio = "detach_ratio"

// schemaOf returns the argument schema of an estimator.
func schemaOf(k Kind) args.Schema {
	s := args.Schema{
		{Name: "adaptive", Kind: args.Bool, Ctor: false, Default: false, InDefaults: true,
			Doc: "adapt the coefficient towards target_kl (KL penalty only)"},
		{Name: "kl_coef", Kind: args.Float, Ctor: 0.001, Default: 0.001, InDefaults: true,
			Doc: "KL coefficient (initial value when adaptive)"},
		{Name: "target_kl", Kind: args.Float, Nullable: true, Doc: "adaptive controller: target KL (not 0)"},
		{Name: "horizon", Kind: args.Float, Nullable: true, Doc: "adaptive controller: horizon (not 0)"},
	}
	if k == CorrectedK3 {
		s = append(s, args.Param{Name: DetachRatio, Kind: args.Bool, Ctor: false,
			Doc: "Q-42 fix: detach the IS ratio, so the gradient is the k3 gradient times the clamped ratio"})
	}
	return s
}

// Registry returns the KL function registry, built once (the same registry
// serves kl_penalty_fn and kl_loss_fn).
var Registry = sync.OnceValue(func() *registry.Registry[Kind] { return registry.Of("KL function", kindNames) })

// Family returns the KL functions as a registry.Family.
func Family() registry.Family {
	return Registry().Family(func(k Kind) registry.Entry { return registry.Entry{Params: schemaOf(k)} })
}

// Fn is a configured KL function. Its coefficient is held by a Controller;
// ApplyPenalty updates it, so an Fn used as kl_penalty_fn is stateful and
// not safe for concurrent ApplyPenalty calls.
type Fn struct {
	Name        string
	Kind        Kind
	Ctl         Controller
	DetachRatio bool
}

// New configures a KL function from user arguments (nil: default_args).
// adaptive=true needs target_kl and horizon.
func New(name string, user args.Values) (*Fn, error) {
	k, err := Registry().Get(name)
	if err != nil {
		return nil, err
	}
	v, err := schemaOf(k).Resolve(user)
	if err != nil {
		return nil, fmt.Errorf("KL function %s: %w", name, err)
	}
	f := &Fn{Name: name, Kind: k, DetachRatio: v.Bool(DetachRatio)}
	coef := v.Float("kl_coef")
	if !v.Bool("adaptive") {
		f.Ctl = &Fixed{C: coef}
		return f, nil
	}
	target, okT := v.OptFloat("target_kl")
	horizon, okH := v.OptFloat("horizon")
	if !okT || !okH {
		return nil, schema.BadInputf("KL function %s: Target KL and horizon must be provided for adaptive KL.", name)
	}
	// Upstream divides Python floats by both (ZeroDivisionError at 0);
	// unused, they may be anything finite.
	if target == 0 || horizon == 0 {
		return nil, schema.BadInputf("KL function %s: adaptive KL divides by target_kl and horizon: they must not be 0, got %v and %v", name, target, horizon)
	}
	f.Ctl = &Adaptive{C: coef, Target: target, Horizon: horizon}
	return f, nil
}

// Token returns the estimate at one token and its derivative with respect to
// lp (stop-gradients as upstream: none). old is used only by corrected_k3 and
// only when hasOld.
func (f *Fn) Token(lp, ref, old float64, hasOld bool) (v, d float64) {
	switch f.Kind {
	case K1:
		return k1(lp, ref)
	case K2:
		return k2(lp, ref)
	case K3:
		return k3(lp, ref)
	case LowVarKL:
		return lowVarKL(lp, ref)
	case Abs:
		return absKL(lp, ref)
	case CorrectedK3:
		if !hasOld {
			return k3(lp, ref)
		}
		return f.correctedK3(lp, ref, old)
	}
	return 0, 0
}

// The estimators at one token: the value and its derivative w.r.t. lp.
func k1(lp, ref float64) (float64, float64) { return lp - ref, 1 }

func k2(lp, ref float64) (float64, float64) {
	x := lp - ref
	return 0.5 * x * x, x
}

// k3 is exp(x) - 1 - x with x = ref - lp, and its derivative 1 - exp(x).
func k3(lp, ref float64) (float64, float64) {
	x := ref - lp
	e := fastexp.Exp(x)
	return e - 1 - x, 1 - e
}

func lowVarKL(lp, ref float64) (float64, float64) {
	x, px := torch.Clamp(ref-lp, -20, 20)
	e := fastexp.Exp(x)
	k, pk := torch.Clamp(e-x-1, -10, 10)
	return k, -pk * px * (e - 1)
}

func absKL(lp, ref float64) (float64, float64) {
	x := lp - ref
	switch {
	case x > 0:
		return x, 1
	case x < 0:
		return -x, -1
	}
	return 0, 0
}

// correctedK3 is k3 times the IS ratio exp(lp - old) clamped to [0, 2].
func (f *Fn) correctedK3(lp, ref, old float64) (float64, float64) {
	v, d := k3(lp, ref)
	// The ratio carries gradient upstream unless DetachRatio.
	r := fastexp.Exp(lp - old)
	w, pw := torch.Clamp(r, 0, 2)
	g := d * w
	if !f.DetachRatio {
		g += v * pw * r
	}
	return v * w, g
}

// Values writes upstream's calculate_kl(lp, ref, old) into dst, elementwise
// and unmasked; old may be nil.
func (f *Fn) Values(dst, lp, ref, old []float64) {
	for i := range dst {
		o := 0.0
		if old != nil {
			o = old[i]
		}
		dst[i], _ = f.Token(lp[i], ref[i], o, old != nil)
	}
}

// Kernel is the per-token kernel of the KL loss. Sums: Σ c·m·kl.
type Kernel struct {
	Fn *Fn
}

// Sums implements tokens.Kernel.
func (k Kernel) Sums() int { return 1 }

// Row implements tokens.Kernel: the gradient is taken w.r.t. logprob. The
// estimator is chosen once per row, so that each row runs a loop with its
// formula inlined.
func (k Kernel) Row(r *tokens.Row, s []float64) {
	n := len(r.LP)
	lp, ref := r.LP, r.Ref[:n]
	var sum float64
	switch f := k.Fn; {
	case f.Kind == K1:
		sum = rowSum(r, func(t int) (float64, float64) { return k1(lp[t], ref[t]) })
	case f.Kind == K2:
		sum = rowSum(r, func(t int) (float64, float64) { return k2(lp[t], ref[t]) })
	case f.Kind == K3, f.Kind == CorrectedK3 && r.Old == nil:
		sum = rowSum(r, func(t int) (float64, float64) { return k3(lp[t], ref[t]) })
	case f.Kind == LowVarKL:
		sum = rowSum(r, func(t int) (float64, float64) { return lowVarKL(lp[t], ref[t]) })
	case f.Kind == Abs:
		sum = rowSum(r, func(t int) (float64, float64) { return absKL(lp[t], ref[t]) })
	case f.Kind == CorrectedK3:
		old := r.Old[:n]
		sum = rowSum(r, func(t int) (float64, float64) { return f.correctedK3(lp[t], ref[t], old[t]) })
	default: // none: no term, its gradient 0
		clear(r.Grad[:n])
	}
	s[0] += r.Scale * sum
}

// rowSum runs est over the row's tokens of non-zero mask m, writes the
// gradient GradScale·m·d (0 where m is 0) and returns Σ m·v.
func rowSum(r *tokens.Row, est func(t int) (v, d float64)) (sum float64) {
	grad := r.Grad[:len(r.LP)]
	for t, mt := range r.Mask[:len(grad)] {
		g := 0.0
		if mt != 0 {
			v, d := est(t)
			sum += v * mt
			g = r.GradScale * mt * d
		}
		grad[t] = g
	}
	return sum
}

// Loss is upstream's calculate_kl_loss: aggregate(kl(lp, ref, old), mask,
// mode) times the current coefficient, with d/dlogprob written into grad.
// The batch needs logprob, ref_logprob and action_mask; old_logprob is used
// when present (the trainer passes it). none gives 0, no metrics and a zero
// gradient. The controller is not updated.
func (f *Fn) Loss(b *tokens.Batch, mode agg.Mode, grad []float64) (float64, agg.Metrics, error) {
	return f.LossOn(tokens.CPU, b, mode, grad)
}

// ApplyPenalty is upstream's apply_kl_penalty_to_reward on token-level
// scores (flat, laid out as the batch): kl = kl(old_logprob, ref_logprob)·m
// (no IS ratio: corrected_k3 is k3 here), rewards = scores - c·kl, metrics
// kl = mean over rows of the row's masked mean kl and kl_coef = c, the
// coefficient before the controller's update with that kl. none returns the
// scores and no metrics. Without ref_logprob it returns the scores with kl 0
// and kl_coef 0 (upstream's intended branch, unreachable there: Q-09). It is
// NewPenalty, Apply and Finish over one window.
func (f *Fn) ApplyPenalty(b *tokens.Batch, scores []float64) ([]float64, agg.Metrics, error) {
	p := f.NewPenalty()
	rewards, err := p.Apply(b, scores)
	if err != nil {
		return nil, nil, err
	}
	return rewards, p.Finish(), nil
}

// Penalty applies the KL penalty to a batch handed over in windows of rows:
// Apply on every window, then Finish once. The coefficient is the one
// before the batch; the controller is updated by Finish.
type Penalty struct {
	f      *Fn
	c      float64
	sum    float64 // Σ over rows of each row's masked mean KL
	rows   int
	noRef  bool
	called bool
}

// NewPenalty starts the penalty of one batch.
func (f *Fn) NewPenalty() *Penalty { return &Penalty{f: f, c: f.Ctl.Coef()} }

// Apply returns the window's token_level_rewards from its token-level scores.
func (p *Penalty) Apply(b *tokens.Batch, scores []float64) ([]float64, error) {
	f := p.f
	if len(scores) != b.Rows.Tokens() {
		return nil, schema.BadInputf("token_level_scores has %d tokens, the batch has %d", len(scores), b.Rows.Tokens())
	}
	rewards := append([]float64(nil), scores...)
	first := !p.called
	p.called = true
	if f.Kind == None {
		return rewards, nil
	}
	if first && !b.Has(tokens.RefLogProb) {
		p.noRef = true
	}
	if p.noRef {
		return rewards, nil
	}
	if err := b.Require(tokens.OldLogProb, tokens.RefLogProb, tokens.ActionMask); err != nil {
		return nil, fmt.Errorf("KL penalty %s: %w", f.Name, err)
	}
	old, ref, mask := b.Col(tokens.OldLogProb), b.Col(tokens.RefLogProb), b.Col(tokens.ActionMask)
	kl := make([]float64, len(scores))
	for i := range kl {
		v, _ := f.Token(old[i], ref[i], 0, false)
		kl[i] = v * mask[i] // plain product, as upstream
		rewards[i] -= p.c * kl[i]
	}
	for r := 0; r < b.Rows.N(); r++ {
		lo, hi := b.Rows.Span(r)
		p.sum += agg.Mean(kl[lo:hi], mask[lo:hi])
	}
	p.rows += b.Rows.N()
	return rewards, nil
}

// Finish updates the controller with the batch's KL (the mean over rows of
// each row's masked mean) and returns the metrics kl and kl_coef.
func (p *Penalty) Finish() agg.Metrics {
	switch {
	case p.f.Kind == None:
		return agg.Metrics{}
	case p.noRef:
		return agg.Metrics{"kl": 0, "kl_coef": 0}
	}
	cur := p.sum / float64(p.rows)
	p.f.Ctl.Update(cur, p.rows)
	return agg.Metrics{"kl": cur, "kl_coef": p.c}
}

// Controller holds a KL coefficient.
type Controller interface {
	// Coef returns the current coefficient.
	Coef() float64
	// Update feeds the KL measured on a batch of batchSize rows.
	Update(currentKL float64, batchSize int)
}

// Fixed is the constant coefficient (adaptive=false).
type Fixed struct{ C float64 }

// Coef implements Controller.
func (f *Fixed) Coef() float64 { return f.C }

// Update implements Controller: the coefficient does not change.
func (f *Fixed) Update(float64, int) {}

// Adaptive is the adaptive controller:
//
//	e = clip(kl/Target - 1, -0.2, 0.2); C ← C·(1 + e·batchSize/Horizon)
//
// Upstream crashes on its first update (a tensor clip on a Python float,
// quirk Q-08); this is the evident intended formula.
type Adaptive struct{ C, Target, Horizon float64 }

// Coef implements Controller.
func (a *Adaptive) Coef() float64 { return a.C }

// Update implements Controller.
func (a *Adaptive) Update(currentKL float64, batchSize int) {
	e, _ := torch.Clamp(currentKL/a.Target-1, -0.2, 0.2)
	a.C *= 1 + e*float64(batchSize)/a.Horizon
}
