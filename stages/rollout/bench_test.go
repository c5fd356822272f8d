package rollout

import (
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user + system CPU time: on a shared machine it
// is steadier than wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCorrection streams the correction stage over 1M rows × 256
// tokens (2^28 tokens) in record batches of 8192 rows, as the pipeline does:
// two seeded batches are generated before the timer and cycled, so memory
// stays that of two record batches plus their outputs. Presets with batch
// normalisation run both passes. Besides the wall-clock Mtok/s it reports
// CPU nanoseconds per token (all threads), steadier on a shared machine.
//
//	go test -run '^$' -bench Correction -benchtime 1x -count 6 ./stages/rollout
func BenchmarkCorrection(b *testing.B) {
	const rows, width, batchRows = 1 << 20, 256, 8192
	batches := []Input{synth(batchRows, width, 1), synth(batchRows, width, 2)}
	w, m := make([]float64, batchRows*width), make([]float64, batchRows*width)
	for _, tc := range []struct {
		name string
		cfg  map[string]any
	}{
		{"metrics_only", map[string]any{}},
		{"seq_is_rs", map[string]any{"preset": "decoupled_seq_is_rs"}},
		{"token_is_geo_rs", map[string]any{"preset": "decoupled_geo_rs_token_tis"}},
		{"token_is_normalize", map[string]any{"rollout_is": "token", "rollout_is_batch_normalize": true}},
	} {
		cfg, err := Parse(tc.cfg)
		if err != nil {
			b.Fatal(err)
		}
		c, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := cpuTime()
			for range b.N {
				var n Norm
				if c.NeedsFirstPass() {
					for i := 0; i < rows/batchRows; i++ {
						if err := c.Observe(&n, batches[i%2]); err != nil {
							b.Fatal(err)
						}
					}
				}
				var acc Acc
				for i := 0; i < rows/batchRows; i++ {
					if err := c.Apply(batches[i%2], &n, w, m, &acc); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := c.Metrics(&acc, &n); err != nil {
					b.Fatal(err)
				}
			}
			tok := float64(rows*width) * float64(b.N)
			b.ReportMetric(tok/b.Elapsed().Seconds()/1e6, "Mtok/s")
			b.ReportMetric(float64(cpuTime()-cpu0)/tok, "cpu-ns/tok")
		})
	}
}
