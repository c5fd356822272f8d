package loss

import (
	"math"
	"runtime"
	"testing"

	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// BenchmarkLoss measures forward + gradient of every loss (default args;
// dro, whose default dro_beta is refused, with 0.1) at 1024×4096 tokens. Compare runs with benchstat:
//
//	go test -run '^$' -bench 'BenchmarkLoss' -benchmem -count 6 ./stages/loss/ | tee new.txt
func BenchmarkLoss(b *testing.B) {
	const rows, width = 1024, 4096
	batch := tokens.Synthetic(rows, width, 1)
	grad := make([]float64, batch.Rows.Tokens())
	for _, name := range Default().Names() {
		l, err := New(Default(), name, map[string]args.Values{"dro": {"dro_beta": 0.1}}[name])
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			checkDeterministic(b, l, batch, grad)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := l.Eval(batch, grad); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(batch.Rows.Tokens())*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mtok/s")
		})
	}
}

// checkDeterministic is the benchmark's correctness check: a finite loss,
// and the same bits on one thread as on all of them.
func checkDeterministic(b *testing.B, l *Loss, batch *tokens.Batch, grad []float64) {
	b.Helper()
	one := make([]float64, len(grad))
	prev := runtime.GOMAXPROCS(1)
	r1, err := l.Eval(batch, one)
	runtime.GOMAXPROCS(prev)
	if err != nil {
		b.Fatal(err)
	}
	r, err := l.Eval(batch, grad)
	if err != nil {
		b.Fatal(err)
	}
	if v, v1 := r.Loss, r1.Loss; math.IsNaN(v) || math.IsInf(v, 0) || math.Float64bits(v) != math.Float64bits(v1) {
		b.Fatalf("loss %v on all threads, %v on one", v, v1)
	}
	for i := range grad {
		if math.Float64bits(grad[i]) != math.Float64bits(one[i]) {
			b.Fatalf("gradient differs at token %d: %v vs %v", i, grad[i], one[i])
		}
	}
}
