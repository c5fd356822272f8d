package loss

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/rftpipe/rftpipe/stages/internal/fastexp"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// TestPPOVectorBits compares (*PPO).Row with its vector token loop against
// the Go loop alone: every gradient and sum bit for bit, NaN payloads
// included, over random rows of every length 0..37 and a few long ones,
// with NaN, ±Inf, log-ratios beyond ±20, ratios exactly at 1-Low, 1+High
// and ClipC (ties of the dual clip), zero, fractional and NaN masks, with
// and without weights, GradScale 0, -0, NaN and ±Inf, and settings the
// argument checks refuse (NaN, negative, infinite clips).
func TestPPOVectorBits(t *testing.T) {
	if !vectorPPO {
		t.Skip("no vector PPO loop in this build or on this CPU")
	}
	rng := rand.New(rand.NewPCG(25, 6))
	// Log-ratios whose ratios are the clip bounds and the dual-clip bound:
	// 1-(1-r) and (r-1)+1 are exact for r in [0.5, 2].
	dLo, dHi, dC := -0.17, 0.23, 1.3
	rLo, rHi, rC := fastexp.Core(dLo), fastexp.Core(dHi), fastexp.Core(dC)
	kernels := []PPO{
		{Low: 0.2, High: 0.2, ClipC: 3},
		{Low: 1 - rLo, High: rHi - 1, ClipC: rC},
		{Low: 0.1, High: 0.28, ClipC: rC, SeqMask: true, Delta: 1e300}, // never dropped
		{Low: 0.2, High: 0.2, ClipC: 3, SeqMask: true, Delta: -1e300},  // always dropped
		{Low: 0.2, High: 0.2, ClipC: 3, Fallback: true},
		{Low: 0, High: 0, ClipC: 1.5},
		{Low: math.NaN(), High: math.NaN(), ClipC: math.NaN()}, // settings the argument checks refuse
		{Low: -0.5, High: math.Inf(1), ClipC: math.Inf(1)},
	}
	if 1-kernels[1].Low != rLo || 1+kernels[1].High != rHi {
		t.Fatal("the clip bounds are not the ratios")
	}
	logRatio := func() float64 {
		switch rng.IntN(10) {
		case 0:
			return []float64{dLo, dHi, dC}[rng.IntN(3)]
		case 1:
			return []float64{-20, 20, -25, 25, -1e3, 1e3, 19.999}[rng.IntN(7)]
		case 2:
			return 2 * dC * rng.Float64()
		}
		return 0.6 * rng.NormFloat64()
	}
	checkVectorBits(t, rng, kernels, logRatio, &vectorPPO)
}

// TestPPOVectorRange checks that ppoVector runs the first n&^3 tokens and
// only them, with the sums of the Go loop over them, weighted or not.
func TestPPOVectorRange(t *testing.T) {
	if !vectorPPO {
		t.Skip("no vector PPO loop in this build or on this CPU")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for i, n := range []int{0, 3, 4, 7, 8, 33, 4099, 4, 33, 4099} {
		p := ppoTokens{
			lp: make([]float64, n), old: make([]float64, n), adv: make([]float64, n),
			m: make([]float64, n), grad: make([]float64, n), lo: 0.8, hi: 1.2, c3: 3, gs: 0.5,
		}
		if i >= 7 {
			p.w = make([]float64, n)
		}
		for i := range n {
			p.lp[i], p.old[i], p.adv[i] = rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()
			p.m[i] = float64(rng.IntN(2))
			p.grad[i] = -7
			if p.w != nil {
				p.w[i] = 2 * rng.Float64()
			}
		}
		from, s := ppoVector(&p)
		if from != n&^3 {
			t.Fatalf("length %d: ran %d tokens, want %d", n, from, n&^3)
		}
		for i := from; i < n; i++ {
			if p.grad[i] != -7 {
				t.Fatalf("length %d: wrote grad[%d]", n, i)
			}
		}
		want := p
		want.lp, want.grad = p.lp[:from], make([]float64, from)
		if p.w != nil {
			want.w = p.w[:from]
		}
		var w ppoSums
		w.L, w.Clip, w.Low, w.KL = want.run(0, ppoSums{})
		if s != w {
			t.Fatalf("length %d: sums %+v, the Go loop's %+v", n, s, w)
		}
		for i := range from {
			if p.grad[i] != want.grad[i] {
				t.Fatalf("length %d: grad[%d] %v, the Go loop's %v", n, i, p.grad[i], want.grad[i])
			}
		}
	}
}

// BenchmarkPPOLoop measures ppo's forward + gradient (1024×4096 tokens)
// with the vector token loop and with the Go loop alone:
//
//	go test -run '^$' -bench BenchmarkPPOLoop -count 5 ./stages/loss/
func BenchmarkPPOLoop(b *testing.B) {
	const rows, width = 1024, 4096
	batch := tokens.Synthetic(rows, width, 1)
	grad := make([]float64, batch.Rows.Tokens())
	l, err := New(Default(), "ppo", nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, loop := range []struct {
		name   string
		vector bool
	}{{"vector", true}, {"go", false}} {
		b.Run(loop.name, func(b *testing.B) {
			if loop.vector && !vectorPPO {
				b.Skip("no vector PPO loop in this build or on this CPU")
			}
			vectorPPO = loop.vector
			for b.Loop() {
				if _, err := l.Eval(batch, grad); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(batch.Rows.Tokens())*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mtok/s")
		})
	}
}
