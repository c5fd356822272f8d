package torch

import (
	"math"
	"testing"
)

func TestClamp(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		x, lo, hi, want, d float64
	}{
		{0.5, 0, 1, 0.5, 1},
		{0, 0, 1, 0, 1}, // bounds are inside, as in torch
		{1, 0, 1, 1, 1},
		{-3, -2, 2, -2, 0},
		{7, -2, 2, 2, 0},
		{math.Inf(1), -20, 20, 20, 0},
		{math.Inf(-1), -20, 20, -20, 0},
		{nan, -20, 20, nan, 1},
	} {
		got, d := Clamp(tc.x, tc.lo, tc.hi)
		if math.Float64bits(got) != math.Float64bits(tc.want) && !(math.IsNaN(got) && math.IsNaN(tc.want)) || d != tc.d {
			t.Errorf("Clamp(%v, %v, %v) = %v, %v; want %v, %v", tc.x, tc.lo, tc.hi, got, d, tc.want, tc.d)
		}
	}
	// -0 is inside [0, 1] and kept with its sign.
	if got, _ := Clamp(math.Copysign(0, -1), 0, 1); !math.Signbit(got) {
		t.Errorf("Clamp(-0, 0, 1) = %v, want -0", got)
	}
}
