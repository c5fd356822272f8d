package advantage

import "math/bits"

// RNG is the generator behind every random choice of this package
// (duplication, REC's balance drop, the duplicate_informative refill).
//
// It is SplitMix64 (Steele, Lea, Flood 2014): state += 0x9e3779b97f4a7c15,
// output = the state mixed by two xor-shift-multiply rounds. Bounded draws use
// Lemire's multiply-shift method with rejection, so they are unbiased. The
// algorithm is fixed here, not taken from math/rand, so a seed yields the same
// sequence on every platform and Go version.
type RNG struct{ state uint64 }

// NewRNG returns a generator seeded with seed.
func NewRNG(seed uint64) *RNG { return &RNG{state: seed} }

// Uint64 returns the next 64 random bits.
func (r *RNG) Uint64() uint64 {
	r.state += 0x9e3779b97f4a7c15
	z := r.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// IntN returns a uniform integer in [0, n); n must be > 0.
func (r *RNG) IntN(n int) int {
	bound := uint64(n)
	hi, lo := bits.Mul64(r.Uint64(), bound)
	if lo < bound {
		thresh := -bound % bound
		for lo < thresh {
			hi, lo = bits.Mul64(r.Uint64(), bound)
		}
	}
	return int(hi)
}

// Shuffle permutes the first k positions of x[:n] into a uniform random
// k-subset in random order (a partial Fisher-Yates shuffle); k = n shuffles
// everything.
func Shuffle[T any](r *RNG, x []T, k int) {
	n := len(x)
	for i := 0; i < k && i < n-1; i++ {
		j := i + r.IntN(n-i)
		x[i], x[j] = x[j], x[i]
	}
}
