package schema

import (
	"math"
	"testing"
)

func TestRangeContains(t *testing.T) {
	inf := math.Inf(1)
	tests := []struct {
		r   Range
		in  []float64
		out []float64
	}{
		{Finite, []float64{0, -1e300, 1e300}, []float64{math.NaN(), inf, -inf}},
		{Positive, []float64{1e-300, 1, 1e300}, []float64{0, -1, inf, math.NaN()}},
		{NonNeg, []float64{0, 5}, []float64{-1e-300, inf}},
		{Unit, []float64{0, 0.5, 1}, []float64{-0.1, 1.0000001}},
		{"(1,inf)", []float64{1.5}, []float64{1, 0}},
		{"[0,inf]", []float64{0, inf}, []float64{-1, math.NaN()}},
		{"(0,1]", []float64{1}, []float64{0}},
		{NonZero, []float64{-1e300, -5e-324, 5e-324, 1e300}, []float64{0, math.Copysign(0, -1), inf, -inf, math.NaN()}},
		{"(-inf,-1)∪(-1,inf)", []float64{-2, -0.5, 0}, []float64{-1, inf}},
		{"[0,1]∪[2,3]", []float64{0, 1, 2, 3}, []float64{1.5, 4, -1}},
	}
	for _, tc := range tests {
		for _, x := range tc.in {
			if !tc.r.Contains(x) {
				t.Errorf("%s does not contain %v", tc.r, x)
			}
		}
		for _, x := range tc.out {
			if tc.r.Contains(x) {
				t.Errorf("%s contains %v", tc.r, x)
			}
		}
	}
	for _, bad := range []Range{"[1,0]", "(0,0]", "[a,1]", "0,1", "[0;1]", "[nan,1]", "(", "[0,1", "[0,1]∪", "∪[0,1]", "[0,1]∪[a,2]"} {
		if bad.Valid() == nil {
			t.Errorf("%q is valid", bad)
		}
		if bad.Contains(0.5) {
			t.Errorf("malformed %q contains 0.5", bad)
		}
	}
}

// FuzzRange: parsing never panics; a valid range contains its closed
// bounds and no NaN, and Check agrees with Contains.
func FuzzRange(f *testing.F) {
	for _, s := range []string{"", "[0,1]", "(0,inf)", "[0,inf]", "(1,inf)", "[-inf,0)", "[1,0]", "(0,0)", "[0,0]", "[ 0 , 1 ]", "[0x1p-2,1e3)", "[a,b]", "(,)", "(-inf,0)∪(0,inf)", "[0,1]∪"} {
		f.Add(s, 0.5)
	}
	f.Fuzz(func(t *testing.T, s string, x float64) {
		r := Range(s)
		bs, err := r.intervals()
		if r.Contains(math.NaN()) {
			t.Fatalf("%q contains NaN", s)
		}
		if (r.Check("x", x) == nil) != r.Contains(x) {
			t.Fatalf("%q: Check and Contains disagree on %v", s, x)
		}
		if err != nil {
			if r.Contains(x) {
				t.Fatalf("malformed %q contains %v", s, x)
			}
			return
		}
		in := false
		for _, b := range bs {
			if !b.loOpen && !math.IsInf(b.lo, 0) && !r.Contains(b.lo) {
				t.Fatalf("%q does not contain its closed lower bound %v", s, b.lo)
			}
			if !b.hiOpen && !math.IsInf(b.hi, 0) && !r.Contains(b.hi) {
				t.Fatalf("%q does not contain its closed upper bound %v", s, b.hi)
			}
			in = in || x >= b.lo && x <= b.hi
		}
		if r.Contains(x) && !in {
			t.Fatalf("%q contains %v", s, x)
		}
	})
}
