package kl

import (
	"testing"

	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// BenchmarkLoss measures the KL loss (forward + gradient) of every estimator
// at 1024×4096 tokens, old_logprob given (corrected_k3's ratio):
//
//	go test -run '^$' -bench 'BenchmarkLoss' -count 6 ./stages/kl/ | tee new.txt
func BenchmarkLoss(b *testing.B) {
	const rows, width = 1024, 4096
	batch := tokens.Synthetic(rows, width, 1)
	grad := make([]float64, batch.Rows.Tokens())
	for _, name := range Registry().Names() {
		f, err := New(name, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := f.Loss(batch, agg.TokenMean, grad); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(batch.Rows.Tokens())*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mtok/s")
		})
	}
}
