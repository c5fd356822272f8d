package kl

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// TestTokenDerivative checks every estimator's derivative against central
// finite differences, with and without old (corrected_k3's IS ratio).
func TestTokenDerivative(t *testing.T) {
	points := [][3]float64{{-0.3, -0.9, -0.5}, {-1.2, -0.4, -1.0}, {-0.05, -2.5, -0.3}, {-0.8, -0.8, -0.1}}
	for _, name := range Registry().Names() {
		for _, detach := range []bool{false, true} {
			if detach && name != "corrected_k3" {
				continue
			}
			a := args.Values{}
			if detach {
				a[DetachRatio] = true
			}
			f, err := New(name, a)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range points {
				for _, hasOld := range []bool{false, true} {
					_, d := f.Token(p[0], p[1], p[2], hasOld)
					if detach && hasOld {
						// Q-42 fix: k3's derivative times the (constant) clamped ratio.
						w := math.Min(math.Exp(p[0]-p[2]), 2)
						if want := (1 - math.Exp(p[1]-p[0])) * w; math.Abs(d-want) > 1e-12 {
							t.Errorf("%s detached %v: d = %v, want %v", name, p, d, want)
						}
						continue
					}
					const h = 1e-6
					up, _ := f.Token(p[0]+h, p[1], p[2], hasOld)
					down, _ := f.Token(p[0]-h, p[1], p[2], hasOld)
					if fd := (up - down) / (2 * h); math.Abs(fd-d) > 1e-7 {
						t.Errorf("%s %v old=%v: d = %v, finite difference %v", name, p, hasOld, d, fd)
					}
				}
			}
		}
	}
}

func penaltyBatch(t *testing.T) (*tokens.Batch, []float64) {
	t.Helper()
	b, err := tokens.FromMatrix(tokens.OldLogProb, [][]float64{{-0.3, -1.0, -0.2}, {-0.5, -0.1, -0.9}})
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string][][]float64{
		tokens.RefLogProb: {{-0.5, -0.7, -0.4}, {-0.2, -0.3, -0.6}},
		tokens.ActionMask: {{1, 1, 0}, {1, 1, 1}},
	} {
		if err := b.SetMatrix(name, m); err != nil {
			t.Fatal(err)
		}
	}
	return b, []float64{0, 1, 0, 0, 0, -1}
}

// TestAdaptiveController: Q-08 — the adaptive coefficient follows
// kl_coef·(1 + clip(kl/target − 1, ±0.2)·B/horizon) step after step, and the
// metrics report the coefficient used at each step.
func TestAdaptiveController(t *testing.T) {
	b, scores := penaltyBatch(t)
	f, err := New("k1", args.Values{"adaptive": true, "kl_coef": 0.1, "target_kl": 0.05, "horizon": 10.0})
	if err != nil {
		t.Fatal(err)
	}
	// kl = old − ref per token; row means over the mask, then over rows.
	kl := (((-0.3+0.5)+(-1.0+0.7))/(2+1e-8) + ((-0.5+0.2)+(-0.1+0.3)+(-0.9+0.6))/(3+1e-8)) / 2
	coef := 0.1
	for step := 0; step < 3; step++ {
		rewards, m, err := f.ApplyPenalty(b, scores)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(m["kl"]-kl) > 1e-12 || m["kl_coef"] != coef {
			t.Errorf("step %d: metrics %v, want kl %v kl_coef %v", step, m, kl, coef)
		}
		if want := scores[1] - coef*(-1.0+0.7); math.Abs(rewards[1]-want) > 1e-12 {
			t.Errorf("step %d: rewards[1] = %v, want %v", step, rewards[1], want)
		}
		e := math.Max(-0.2, math.Min(0.2, kl/0.05-1))
		coef *= 1 + e*2/10.0
		if math.Abs(f.Ctl.Coef()-coef) > 1e-15 {
			t.Errorf("step %d: coefficient %v, want %v", step, f.Ctl.Coef(), coef)
		}
	}
	if coef == 0.1 {
		t.Fatal("the controller never moved")
	}
}

func TestPenaltyEdges(t *testing.T) {
	b, scores := penaltyBatch(t)
	// without ref_logprob the rewards are the scores, kl 0, coef 0.
	noRef, err := tokens.FromMatrix(tokens.OldLogProb, b.Split(b.Col(tokens.OldLogProb)))
	if err != nil {
		t.Fatal(err)
	}
	f, _ := New("k3", nil)
	rewards, m, err := f.ApplyPenalty(noRef, scores)
	if err != nil || m["kl"] != 0 || m["kl_coef"] != 0 || rewards[1] != scores[1] {
		t.Errorf("no ref: %v %v %v", rewards, m, err)
	}
	if _, _, err := f.ApplyPenalty(b, scores[:2]); !errors.Is(err, schema.ErrBadInput) {
		t.Errorf("short scores: %v", err)
	}
	// Fixed controller: constant coefficient.
	f, _ = New("k2", args.Values{"kl_coef": 0.3})
	for i := 0; i < 2; i++ {
		if _, _, err := f.ApplyPenalty(b, scores); err != nil {
			t.Fatal(err)
		}
	}
	if f.Ctl.Coef() != 0.3 {
		t.Errorf("fixed coefficient moved to %v", f.Ctl.Coef())
	}
}

func TestBadArgs(t *testing.T) {
	tests := []struct {
		name string
		args args.Values
		want string
	}{
		{"k4", nil, "unknown KL function \"k4\" (valid: abs, corrected_k3, k1"},
		{"k1", args.Values{"adaptive": true}, "Target KL and horizon must be provided for adaptive KL."},
		// upstream divides Python floats by both: ZeroDivisionError
		{"k1", args.Values{"adaptive": true, "target_kl": 0.1, "horizon": 0.0}, "they must not be 0, got 0.1 and 0"},
		{"k1", args.Values{"adaptive": true, "target_kl": 0.0, "horizon": 10.0}, "they must not be 0, got 0 and 10"},
		{"k1", args.Values{"kl_coef": math.NaN()}, "argument kl_coef: NaN is outside"},
		{"k1", args.Values{DetachRatio: true}, "unknown argument detach_ratio"},
		{"k1", args.Values{"kl_coef": "big"}, "not a valid float"},
	}
	for _, tc := range tests {
		_, err := New(tc.name, tc.args)
		if !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %v: %v, want bad input containing %q", tc.name, tc.args, err, tc.want)
		}
	}
	b, _ := penaltyBatch(t)
	f, _ := New("k3", nil)
	if _, _, err := f.Loss(b, agg.TokenMean, make([]float64, 6)); !errors.Is(err, schema.ErrBadInput) {
		t.Errorf("loss without logprob: %v", err)
	}
}

// TestRowIsToken: the kernel's row loop (one loop per estimator) gives, bit
// for bit, Σ m·v and the gradient GradScale·m·d of Token at every token: 0
// and fractional masks, NaN and infinite inputs, log-ratios past the
// clamps, with and without old_logprob.
func TestRowIsToken(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	lp := []float64{-0.3, -1.2, -0.05, -0.8, -30, 0, nan, -0.4, -inf, -2, -0.7, -1e-9}
	ref := []float64{-0.9, -0.4, -2.5, -0.8, -0.1, -45, -0.2, nan, -0.3, -2, -0.70000001, 0}
	old := []float64{-0.5, -1.0, -0.3, -0.1, -0.2, -3, -0.2, -0.1, -0.3, 5, -0.7, nan}
	mask := []float64{1, 1, 0.5, 1, 1, 1, 1, 1, 0, 1, 2, 1}
	for _, name := range Registry().Names() {
		for _, detach := range []bool{false, true} {
			if detach && name != "corrected_k3" {
				continue
			}
			var a args.Values
			if name == "corrected_k3" {
				a = args.Values{DetachRatio: detach}
			}
			f, err := New(name, a)
			if err != nil {
				t.Fatal(err)
			}
			for _, withOld := range []bool{false, true} {
				r := &tokens.Row{LP: lp, Ref: ref, Mask: mask, Scale: 0.25, GradScale: 0.75, Grad: make([]float64, len(lp))}
				if withOld {
					r.Old = old
				}
				sums := []float64{0}
				Kernel{Fn: f}.Row(r, sums)
				sum := 0.0
				for i := range lp {
					want := 0.0
					if mask[i] != 0 {
						v, d := f.Token(lp[i], ref[i], old[i], withOld)
						sum += v * mask[i]
						want = r.GradScale * mask[i] * d
					}
					if math.Float64bits(r.Grad[i]) != math.Float64bits(want) {
						t.Errorf("%s detach=%v old=%v: token %d gradient %v, Token's %v", name, detach, withOld, i, r.Grad[i], want)
					}
				}
				if want := r.Scale * sum; math.Float64bits(sums[0]) != math.Float64bits(want) {
					t.Errorf("%s detach=%v old=%v: sum %v, Token's %v", name, detach, withOld, sums[0], want)
				}
			}
		}
	}
}
