//go:build cgo

package kernels

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/rftpipe/rftpipe/gpu/internal/lower"
	"github.com/rftpipe/rftpipe/pipeline/golden"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/conformance"
	"github.com/rftpipe/rftpipe/stages/entropy"
	"github.com/rftpipe/rftpipe/stages/kl"
	"github.com/rftpipe/rftpipe/stages/loss"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

const fixtures = "../../fixtures/conformance"

// TestLayout checks that lower.Kernel, which package gpu hands to the
// device as the rft_kernel argument, has the C compiler's layout.
func TestLayout(t *testing.T) {
	var k lower.Kernel
	size, flagOff, pOff := Layout()
	if got := [3]uintptr{unsafe.Sizeof(k), unsafe.Offsetof(k.Flag), unsafe.Offsetof(k.P)}; got != [3]uintptr{size, flagOff, pOff} {
		t.Fatalf("lower.Kernel size/flag/p = %v, C rft_kernel = %v", got, [3]uintptr{size, flagOff, pOff})
	}
}

// TestGolden runs every device-evaluated golden case through the C build of
// the kernels: in float64 at each case's own tolerance, and with float32
// storage (what the GPU uses by default) at 1e-5 relative, 1e-6 absolute.
func TestGolden(t *testing.T) {
	for _, c := range []struct {
		name string
		ev   Evaluator
		f32  bool
	}{
		{"float64", Evaluator{}, false},
		{"float32-storage", Evaluator{F32: true}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			reps, err := golden.RunDevice(fixtures, c.ev, c.f32)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range reps {
				t.Logf("%s: %d passed, %d failed, %d skipped", r.Kind, r.Passed, r.Failed, r.Skipped)
				for _, m := range r.Mismatches {
					t.Errorf("%s", m)
				}
				for _, m := range r.Ill {
					t.Logf("ill-conditioned for float32 storage: %s", m)
				}
				if r.Passed == 0 {
					t.Errorf("%s: no case ran", r.Kind)
				}
			}
		})
	}
}

// randomBatch returns a ragged batch with every input the kernels read:
// masked-out positions (with NaN log-probs under some of them, which must
// not leak), fractional mask values, zero advantages, ratios equal to 1,
// large log-ratios that hit the ±20 clamps, PPO dual-clip ties, zero KL,
// empty rows, and about half the rows marked expert.
func randomBatch(rng *rand.Rand, rows int) *tokens.Batch {
	lens := make([]int, rows)
	for i := range lens {
		lens[i] = 1 + rng.IntN(48)
	}
	b := tokens.New(agg.NewRows(lens))
	n := b.Rows.Tokens()
	lp, old, ref, adv := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	mask, ent := make([]float64, n), make([]float64, n)
	expert := make([]bool, rows)
	for r := 0; r < rows; r++ {
		lo, hi := b.Rows.Span(r)
		a := rng.NormFloat64()
		switch rng.IntN(5) {
		case 0:
			a = 0
		case 1:
			a = -math.Abs(a)
		}
		expert[r] = rng.IntN(2) == 0
		emptyRow := rng.IntN(8) == 0
		for i := lo; i < hi; i++ {
			lp[i] = -3 * rng.Float64()
			switch rng.IntN(6) {
			case 0:
				old[i] = lp[i] // ratio exactly 1
			case 1:
				old[i] = lp[i] - 25*rng.NormFloat64() // beyond the ±20 clamps
			default:
				old[i] = lp[i] + 0.3*rng.NormFloat64()
			}
			ref[i] = lp[i] + 0.5*rng.NormFloat64()
			if rng.IntN(8) == 0 {
				ref[i] = lp[i] // zero KL: abs's kink
			}
			adv[i] = a
			if rng.IntN(4) == 0 {
				adv[i] = rng.NormFloat64() // token-level advantages too
			}
			if rng.IntN(10) == 0 {
				// ratio exactly 3 with A < 0: PPO's dual-clip tie (clip_ratio_c 3)
				lp[i], old[i], adv[i] = 0, -math.Log(3), -math.Abs(rng.NormFloat64())
			}
			mask[i] = 1
			if rng.IntN(10) == 0 {
				mask[i] = 0.5 // fractional masks weight their token
			}
			if emptyRow || rng.IntN(5) == 0 {
				mask[i] = 0
				if rng.IntN(3) == 0 {
					lp[i] = math.NaN()
				}
			}
			ent[i] = 5 * rng.Float64()
		}
	}
	steps := make([]int64, rows)
	for i := range steps {
		steps[i] = 3
	}
	for name, v := range map[string][]float64{tokens.LogProb: lp, tokens.OldLogProb: old, tokens.RefLogProb: ref,
		tokens.Advantages: adv, tokens.ActionMask: mask, tokens.Entropy: ent} {
		if err := b.Set(name, v); err != nil {
			panic(err)
		}
	}
	if err := b.SetExpertMask(expert); err != nil {
		panic(err)
	}
	if err := b.SetStep(steps); err != nil {
		panic(err)
	}
	return b
}

// close64 compares two results of the same float64 math evaluated in a
// different order of additions.
func close64(got, want float64) bool {
	if math.IsNaN(want) || math.IsInf(want, 0) {
		return math.IsNaN(got) == math.IsNaN(want) && (math.IsNaN(got) || got == want)
	}
	return math.Abs(got-want) <= 1e-13+1e-12*math.Abs(want)
}

// compare checks a C evaluation against the Go one: value, metrics (same
// names) and gradient.
func compare(t *testing.T, name string, gv, cv float64, gm, cm agg.Metrics, gg, cg []float64) {
	t.Helper()
	if !close64(cv, gv) {
		t.Errorf("%s: value C %v, Go %v", name, cv, gv)
	}
	if len(gm) != len(cm) {
		t.Errorf("%s: metrics C %v, Go %v", name, cm, gm)
	}
	for k, v := range gm {
		if c, ok := cm[k]; !ok || !close64(c, v) {
			t.Errorf("%s: metric %s C %v, Go %v", name, k, c, v)
		}
	}
	for i := range gg {
		if !close64(cg[i], gg[i]) {
			t.Errorf("%s: grad[%d] C %v, Go %v", name, i, cg[i], gg[i])
			return
		}
	}
}

// lossConfigs returns every argument set of the golden policy_loss cases
// (the variants the reference exercises), plus the opt-in quirk fixes.
func lossConfigs(t *testing.T) []struct {
	fn   string
	args args.Values
} {
	f, err := conformance.Load(fixtures + "/policy_loss.json")
	if err != nil {
		t.Fatal(err)
	}
	var out []struct {
		fn   string
		args args.Values
	}
	seen := map[string]bool{}
	for _, c := range f.Cases {
		v, err := args.FromJSON(c.Args)
		if err != nil {
			t.Fatal(err)
		}
		key, _ := json.Marshal(struct {
			Fn string
			A  args.Values
		}{c.Fn, v})
		if seen[string(key)] {
			continue
		}
		if _, err := loss.New(loss.Default(), c.Fn, v); err != nil {
			continue // a case whose arguments the reference rejects
		}
		if s, _ := loss.Default().Get(c.Fn); s.New.CPUOnly {
			continue // no device form (m2po)
		}
		seen[string(key)] = true
		out = append(out, struct {
			fn   string
			args args.Values
		}{c.Fn, v})
	}
	for _, x := range []struct {
		fn   string
		args args.Values
	}{
		{"sapo", args.Values{"paper_gradient": true}},
		{"topr", args.Values{"sequence_ratio": true}},
		{"dpo", args.Values{"per_pair": true}},
		{"mix_chord", args.Values{"clip_range": 0.2, "guard_empty_partitions": true, "mu_warmup_steps": int64(5), "mu_decay_steps": int64(10)}},
		{"ppo", args.Values{"clip_range": 0.2, "enable_sequence_masking": true, "delta_sequence_masking": -0.05}},
		{"ppo", args.Values{"clip_range": 0.2, "loss_agg_mode": "seq-mean-token-sum-norm"}},
	} {
		out = append(out, x)
	}
	return out
}

// TestMatchesGoKernels evaluates every loss configuration, every KL
// estimator and every entropy function in every aggregation mode on random
// batches with the Go kernels (tokens.CPU) and with the C build of the
// device kernels, through the same plans and finishing code.
func TestMatchesGoKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 2026))
	var ev Evaluator
	cases := 0
	for _, cfg := range lossConfigs(t) {
		l, err := loss.New(loss.Default(), cfg.fn, cfg.args)
		if err != nil {
			t.Fatalf("%s %v: %v", cfg.fn, cfg.args, err)
		}
		for trial := 0; trial < 5; trial++ {
			rows := 2 + 2*rng.IntN(6)
			b := randomBatch(rng, rows)
			gg, cg := make([]float64, b.Rows.Tokens()), make([]float64, b.Rows.Tokens())
			gr, gerr := l.EvalOn(tokens.CPU, b, gg)
			cr, cerr := l.EvalOn(ev, b, cg)
			if (gerr == nil) != (cerr == nil) {
				t.Fatalf("%s %v: errors Go %v, C %v", cfg.fn, cfg.args, gerr, cerr)
			}
			compare(t, fmt.Sprintf("%s %v trial %d", cfg.fn, cfg.args, trial), gr.Loss, cr.Loss, gr.Metrics, cr.Metrics, gg, cg)
			cases++
		}
	}
	modes := []agg.Mode{agg.TokenMean, agg.SeqMeanTokenSum, agg.SeqMeanTokenMean, agg.SeqMeanTokenSumNorm}
	for _, name := range kl.Registry().Names() {
		for _, detach := range []bool{false, true} {
			user := args.Values{"kl_coef": 0.05}
			if detach {
				if name != "corrected_k3" {
					continue
				}
				user[kl.DetachRatio] = true
			}
			f, err := kl.New(name, user)
			if err != nil {
				t.Fatal(err)
			}
			for _, md := range modes {
				b := randomBatch(rng, 5)
				gg, cg := make([]float64, b.Rows.Tokens()), make([]float64, b.Rows.Tokens())
				gv, gm, _ := f.LossOn(tokens.CPU, b, md, gg)
				cv, cm, err := f.LossOn(ev, b, md, cg)
				if err != nil {
					t.Fatalf("kl %s %v: %v", name, md, err)
				}
				compare(t, fmt.Sprintf("kl %s detach=%v %v", name, detach, md), gv, cv, gm, cm, gg, cg)
				cases++
			}
		}
	}
	for _, name := range entropy.Registry().Names() {
		f, err := entropy.New(name, args.Values{"entropy_coef": 0.01})
		if err != nil {
			t.Fatal(err)
		}
		for _, md := range modes {
			b := randomBatch(rng, 6)
			gg, cg := make([]float64, b.Rows.Tokens()), make([]float64, b.Rows.Tokens())
			gv, gm, _ := f.LossOn(tokens.CPU, b, md, gg)
			cv, cm, err := f.LossOn(ev, b, md, cg)
			if err != nil {
				t.Fatalf("entropy %s %v: %v", name, md, err)
			}
			compare(t, fmt.Sprintf("entropy %s %v", name, md), gv, cv, gm, cm, gg, cg)
			cases++
		}
	}
	t.Logf("%d random evaluations agree", cases)
}
