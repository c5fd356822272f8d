// Package fastexp is a fast e^x for the per-token kernels (stages/loss,
// stages/rollout, stages/kl): within about 1.5 ulp, about twice as fast as math.Exp.
// Its constants are exported (Constants) for vector forms of Core that give
// its bits.
package fastexp

import "math"

// Exp is e^x to within about 1.5 ulp, about twice as
// fast as math.Exp on the hot path of the kernels: x = (64k + j)·ln2/64 + r,
// e^x = 2^k · 2^(j/64) · e^r with a 64-entry table and a degree-5 polynomial
// for |r| <= ln2/128 (truncation error below 4e-17). Arguments outside
// (-708, 709), NaN and ±Inf go to math.Exp.
func Exp(x float64) float64 {
	if !(x > -708 && x < 709) {
		return math.Exp(x)
	}
	return Core(x)
}

// Core is Exp for x in (-708, 709), small enough to be inlined: the
// kernels call it for log-ratios clamped to ±20.
func Core(x float64) float64 {
	kf := x*invStep + round - round
	r := x - kf*ln2Hi - kf*ln2Lo
	k := int64(kf)
	p := 1 + r*(1+r*(c2+r*(c3+r*(c4+r*c5))))
	return math.Float64frombits(math.Float64bits(expTable[k&63]*p) + uint64(k>>6)<<52)
}

// Core's constants.
const (
	invStep = 64 / math.Ln2
	ln2Hi   = 6.93147180369123816490e-01 / 64 // low bits zero: k·ln2Hi is exact
	ln2Lo   = 1.90821492927058770002e-10 / 64
	round   = 0x1.8p52 // adding and subtracting it rounds to an integer
	c2      = 1.0 / 2  // the polynomial's coefficients 1/i!
	c3      = 1.0 / 6
	c4      = 1.0 / 24
	c5      = 1.0 / 120
)

// Consts are Core's constants as float64 values, for a vector form of Core
// that gives its bits by the same operations in the same order:
//
//	kf = x·InvStep + Round - Round, k = int64(kf)
//	r = x - kf·Ln2Hi - kf·Ln2Lo
//	p = 1 + r·(1 + r·(C2 + r·(C3 + r·(C4 + r·C5))))
//	e^x = bits(Table[k&63]·p) + (k>>6)<<52
type Consts struct {
	InvStep, Round, Ln2Hi, Ln2Lo float64
	C2, C3, C4, C5               float64
	Table                        *[64]float64 // 2^(j/64); not to be written
}

// Constants returns Core's constants.
func Constants() Consts {
	return Consts{
		InvStep: invStep, Round: round, Ln2Hi: ln2Hi, Ln2Lo: ln2Lo,
		C2: c2, C3: c3, C4: c4, C5: c5,
		Table: &expTable,
	}
}

// expTable[j] = 2^(j/64).
var expTable = func() (t [64]float64) {
	for j := range t {
		t[j] = math.Exp2(float64(j) / 64)
	}
	return t
}()
