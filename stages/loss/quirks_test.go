package loss

import (
	"math"
	"testing"

	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// The quirk-fix flags are checked against plain float64 re-computations of
// the fixed formulas on padded rows, independent of stages/agg.

// aggRef is loss_agg_mode written out on padded rows.
func aggRef(v, m [][]float64, mode string) float64 {
	var all, cnt, rows float64
	for b := range v {
		var s, c float64
		for t := range v[b] {
			if m[b][t] != 0 {
				s += v[b][t] * m[b][t]
				c += m[b][t]
			}
		}
		all += s
		cnt += c
		switch mode {
		case "seq-mean-token-sum":
			rows += s
		case "seq-mean-token-mean":
			rows += s / (c + 1e-8)
		}
	}
	switch mode {
	case "token-mean":
		return all / (cnt + 1e-8)
	case "seq-mean-token-sum-norm":
		return all / (float64(len(v[0])) + 1e-8)
	}
	return rows / float64(len(v))
}

// each applies f at every token of the padded rows.
func each(f func(b, t int) float64) [][]float64 {
	out := make([][]float64, len(lp3))
	for b := range lp3 {
		out[b] = make([]float64, len(lp3[b]))
		for t := range lp3[b] {
			out[b][t] = f(b, t)
		}
	}
	return out
}

// the config overwrites GSPO's seq-mean-token-mean with the global
// token-mean unless respect_own_loss_agg_mode is set.
func TestQ05GSPOAggMode(t *testing.T) {
	s, _ := Default().Get("gspo")
	d := s.New
	low, high := 0.0003, 0.0004
	gspoRef := func(mode string) float64 {
		v := each(func(b, t int) float64 {
			var s, c float64
			for u := range lp3[b] {
				s += (lp3[b][u] - old3[b][u]) * mask3[b][u]
				c += mask3[b][u]
			}
			r := math.Exp(s / (c + 1e-8))
			a := adv3[b][t]
			return math.Max(-a*r, -a*math.Min(math.Max(r, 1-low), 1+high))
		})
		return aggRef(v, mask3, mode)
	}
	tests := []struct {
		name     string
		user     args.Values
		wantMode string
	}{
		{"upstream override", nil, "token-mean"},
		{"respect own mode", args.Overlay(d.DefaultArgs(), args.Values{RespectOwnAggMode: true}), "seq-mean-token-mean"},
	}
	for _, tc := range tests {
		l, err := d.FromConfig(tc.user, "token-mean")
		if err != nil {
			t.Fatal(err)
		}
		if got := l.Args.String("loss_agg_mode"); got != tc.wantMode {
			t.Errorf("%s: loss_agg_mode %s, want %s", tc.name, got, tc.wantMode)
		}
		b := batch(t, lp3, old3, nil, adv3, mask3)
		res, err := l.Eval(b, make([]float64, b.Rows.Tokens()))
		if err != nil {
			t.Fatal(err)
		}
		if want := gspoRef(tc.wantMode); !near(res.Loss, want) {
			t.Errorf("%s: loss %v, want %v", tc.name, res.Loss, want)
		}
	}
	if gspoRef("token-mean") == gspoRef("seq-mean-token-mean") {
		t.Fatal("test inputs do not separate the modes")
	}
}

// paper_gradient optimises -A·g(r) with r differentiable.
func TestQ06SAPOPaperGradient(t *testing.T) {
	for _, mode := range []string{"token-mean", "seq-mean-token-sum"} {
		b := batch(t, lp3, old3, nil, adv3, mask3)
		res, grad := eval(t, "sapo", args.Values{"paper_gradient": true, "loss_agg_mode": mode}, b)
		tau := func(a float64) float64 {
			if a > 0 {
				return 1.0
			}
			return 1.05
		}
		sig := func(b, t int) (float64, float64, float64) {
			r := math.Exp(lp3[b][t] - old3[b][t])
			return 1 / (1 + math.Exp(-tau(adv3[b][t])*(r-1))), r, tau(adv3[b][t])
		}
		want := aggRef(each(func(b, t int) float64 {
			s, _, tu := sig(b, t)
			return -adv3[b][t] * s * 4 / tu
		}), mask3, mode)
		if !near(res.Loss, want) || !near(res.Metrics["sapo_loss"], want) {
			t.Errorf("%s: loss %v, sapo_loss %v, want %v", mode, res.Loss, res.Metrics["sapo_loss"], want)
		}
		// Gradient weight of the paper: A·4σ(1-σ)·r, 1 at r = 1 (with token-mean weights).
		if mode == "token-mean" {
			i := 0
			for bi := range lp3 {
				for ti := range lp3[bi] {
					s, r, _ := sig(bi, ti)
					w := -adv3[bi][ti] * 4 * s * (1 - s) * r * mask3[bi][ti] / (9 + 1e-8)
					if !near(grad[i], w) {
						t.Errorf("grad[%d] = %v, want %v", i, grad[i], w)
					}
					i++
				}
			}
		}
	}
}

// per_pair gives the mean of per-pair DPO losses (spec example).
func TestQ20DPOPerPair(t *testing.T) {
	lp := [][]float64{{-1}, {-2}, {-1}, {-0.5}}
	ref := [][]float64{{-1.5}, {-1.5}, {-1}, {-1}}
	ones := [][]float64{{1}, {1}, {1}, {1}}
	logsig := func(x float64) float64 { return -math.Log(1 + math.Exp(-x)) }
	tests := []struct {
		perPair   bool
		loss, acc float64
		chosen    float64
	}{
		{false, -logsig(0.5), 1, 0.5},                        // one margin: (0.5 + 0) − (−0.5 + 0.5)
		{true, (-logsig(1.0) - logsig(-0.5)) / 2, 0.5, 0.25}, // margins 1.0 and −0.5
	}
	for _, tc := range tests {
		b := batch(t, lp, nil, ref, nil, ones)
		res, _ := eval(t, "dpo", args.Values{"beta": 1.0, "per_pair": tc.perPair}, b)
		if !near(res.Loss, tc.loss) || !near(res.Metrics["accuracy_mean"], tc.acc) || !near(res.Metrics["chosen_reward"], tc.chosen) {
			t.Errorf("per_pair=%v: loss %v acc %v chosen %v, want %v %v %v", tc.perPair, res.Loss,
				res.Metrics["accuracy_mean"], res.Metrics["chosen_reward"], tc.loss, tc.acc, tc.chosen)
		}
	}
	if math.Abs(tests[0].loss-0.4741) > 1e-4 || math.Abs(tests[1].loss-0.6437) > 1e-4 {
		t.Errorf("spec example values: %v, %v", tests[0].loss, tests[1].loss)
	}
	// The per-pair gradient against finite differences.
	b := batch(t, lp3[:2], nil, old3[:2], nil, mask3[:2])
	a := args.Values{"beta": 0.5, "per_pair": true}
	_, grad := eval(t, "dpo", a, b)
	x := b.Col(tokens.LogProb)
	for i := range x {
		v := x[i]
		x[i] = v + 1e-6
		up, _ := eval(t, "dpo", a, b)
		x[i] = v - 1e-6
		down, _ := eval(t, "dpo", a, b)
		x[i] = v
		if fd := (up.Loss - down.Loss) / 2e-6; math.Abs(fd-grad[i]) > 1e-7 {
			t.Errorf("grad[%d] = %v, finite difference %v", i, grad[i], fd)
		}
	}
}

// sequence_ratio truncates the row's sequence ratio.
func TestQ07TOPRSequenceRatio(t *testing.T) {
	thr := 0.5
	alpha := func(b, t int) float64 {
		var s float64
		for u := range lp3[b] {
			s += (lp3[b][u] - old3[b][u]) * mask3[b][u]
		}
		if adv3[b][t] <= thr {
			return math.Min(math.Max(math.Exp(math.Max(-20, math.Min(20, s))), 0), 1)
		}
		return 1
	}
	want := aggRef(each(func(b, t int) float64 { return -alpha(b, t) * adv3[b][t] * lp3[b][t] }), mask3, "token-mean")
	wantAlpha := aggRef(each(alpha), mask3, "token-mean")
	b := batch(t, lp3, old3, nil, adv3, mask3)
	res, grad := eval(t, "topr", args.Values{"advantage_threshold": thr, "sequence_ratio": true}, b)
	if !near(res.Loss, want) || !near(res.Metrics["avg_alpha"], wantAlpha) {
		t.Errorf("loss %v avg_alpha %v, want %v %v", res.Loss, res.Metrics["avg_alpha"], want, wantAlpha)
	}
	if g := -alpha(1, 0) * adv3[1][0] / (9 + 1e-8); !near(grad[4], g) {
		t.Errorf("grad[4] = %v, want %v", grad[4], g)
	}
}

// unscaled_metrics reports the inner metrics without n·w;
// guard_empty_partitions skips mix_chord's empty part instead of NaN.
func TestQ17Mix(t *testing.T) {
	b := batch(t, lp3, old3, nil, adv3, mask3)
	if err := b.SetExpertMask([]bool{false, true, false}); err != nil {
		t.Fatal(err)
	}
	base := args.Values{"clip_range": 0.2, "mu": 0.1, "ppo_mini_batch_size": 4, "train_batch_size_usual": 2}
	scaled, _ := eval(t, "mix", base, b)
	unscaled, _ := eval(t, "mix", args.Overlay(base, args.Values{"unscaled_metrics": true}), b)
	// usual rows 0 and 2: n_u = 2, w_u = (4 // 1) / (2 // 1) = 2.
	if got, want := scaled.Metrics["usual/pg_clipfrac"], 4*unscaled.Metrics["usual/pg_clipfrac"]; !near(got, want) || unscaled.Metrics["usual/pg_clipfrac"] > 1 {
		t.Errorf("usual/pg_clipfrac scaled %v, unscaled %v", got, unscaled.Metrics["usual/pg_clipfrac"])
	}
	if scaled.Loss != unscaled.Loss {
		t.Errorf("unscaled_metrics changed the loss: %v vs %v", scaled.Loss, unscaled.Loss)
	}

	// mix_chord with only usual rows and a seq-mean mode.
	if err := b.SetExpertMask([]bool{false, false, false}); err != nil {
		t.Fatal(err)
	}
	if err := b.SetStep([]int64{3, 3, 3}); err != nil {
		t.Fatal(err)
	}
	chord := args.Values{"clip_range": 0.2, "loss_agg_mode": "seq-mean-token-mean"}
	up, _ := eval(t, "mix_chord", chord, b)
	fixed, grad := eval(t, "mix_chord", args.Overlay(chord, args.Values{"guard_empty_partitions": true}), b)
	if !math.IsNaN(up.Loss) {
		t.Errorf("upstream mix_chord with no expert rows: loss %v, want NaN", up.Loss)
	}
	ppo, ppoGrad := eval(t, "ppo", chord, b)
	if want := 0.9 * 3 * ppo.Loss; !near(fixed.Loss, want) {
		t.Errorf("guarded loss %v, want %v", fixed.Loss, want)
	}
	if _, has := fixed.Metrics["expert/sft_phi_loss"]; has {
		t.Error("guarded mix_chord reports the empty expert part")
	}
	for i := range grad {
		if !near(grad[i], 0.9*3*ppoGrad[i]) {
			t.Fatalf("grad[%d] = %v, want %v", i, grad[i], 0.9*3*ppoGrad[i])
		}
	}
}
