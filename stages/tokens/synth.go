package tokens

import (
	"math"
	"math/rand/v2"

	"github.com/rftpipe/rftpipe/stages/agg"
)

// Synthetic returns a seeded random batch of rows × width tokens with every
// input a loss, KL or entropy term reads, for benchmarks and `rftpipe bench`:
// log-probs in (-∞, 0], old/ref/teacher within ~0.1 of them, one advantage
// per row, entropy in [0, 3), a mask of ones with a random tail of zeros (at
// most width/8), every fourth row an expert row, step 1 on every row.
func Synthetic(rows, width int, seed uint64) *Batch {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	lens := make([]int, rows)
	for i := range lens {
		lens[i] = width
	}
	b := New(agg.NewRows(lens))
	n := rows * width
	lp, old, ref, teacher := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	adv, mask, ent := make([]float64, n), make([]float64, n), make([]float64, n)
	expert, step := make([]bool, rows), make([]int64, rows)
	for r := 0; r < rows; r++ {
		a := rng.NormFloat64()
		tail := rng.IntN(width/8 + 1)
		for t := 0; t < width; t++ {
			i := r*width + t
			lp[i] = -math.Abs(rng.NormFloat64())
			old[i] = lp[i] + 0.1*rng.NormFloat64()
			ref[i] = lp[i] + 0.1*rng.NormFloat64()
			teacher[i] = lp[i] + 0.1*rng.NormFloat64()
			ent[i] = 3 * rng.Float64()
			if t < width-tail {
				mask[i] = 1
				adv[i] = a
			}
		}
		expert[r] = r%4 == 3
		step[r] = 1
	}
	for name, v := range map[string][]float64{LogProb: lp, OldLogProb: old, RefLogProb: ref, TeacherLogProb: teacher,
		Advantages: adv, ActionMask: mask, Entropy: ent} {
		if err := b.Set(name, v); err != nil {
			panic(err) // lengths are right by construction
		}
	}
	if err := b.SetExpertMask(expert); err != nil {
		panic(err)
	}
	if err := b.SetStep(step); err != nil {
		panic(err)
	}
	return b
}
