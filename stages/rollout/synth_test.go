package rollout

import (
	"math"
	"math/rand/v2"

	"github.com/rftpipe/rftpipe/stages/agg"
)

// synth is a seeded batch of rows × width tokens: old log-probs in
// (-∞, 0], rollout ones within ~0.05 of them, a tail of padding per row.
func synth(rows, width int, seed uint64) Input {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	lens := make([]int, rows)
	for i := range lens {
		lens[i] = width
	}
	n := rows * width
	in := Input{Rows: agg.NewRows(lens), Old: make([]float64, n), Rollout: make([]float64, n), Mask: make([]float64, n)}
	for r := 0; r < rows; r++ {
		tail := rng.IntN(width/4 + 1)
		for t := 0; t < width; t++ {
			i := r*width + t
			in.Old[i] = -math.Abs(rng.NormFloat64())
			in.Rollout[i] = in.Old[i] + 0.05*rng.NormFloat64()
			if t < width-tail {
				in.Mask[i] = 1
			}
		}
	}
	return in
}
