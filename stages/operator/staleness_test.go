package operator

import (
	"math"
	"slices"
	"testing"
)

// TestStaleness: rows below the minimum version, and null versions (-1),
// are dropped as stale; the others are kept in input order.
func TestStaleness(t *testing.T) {
	versions := []int64{3, 0, 5, -1, 4, 2, math.MaxInt64}
	for _, tc := range []struct {
		min    int64
		beyond bool
		keep   []int32
	}{
		{0, false, []int32{0, 1, 2, 4, 5, 6}},
		{3, false, []int32{0, 2, 4, 6}},
		{5, false, []int32{2, 6}},
		{6, false, []int32{6}},
		{math.MaxInt64, false, []int32{6}},
		{math.MaxInt64, true, nil},
	} {
		in := &Input{Reward: make([]float64, len(versions)), ModelVersion: versions}
		res, err := Staleness{MinVersion: tc.min, Beyond: tc.beyond}.Apply(in)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.Order, tc.keep) {
			t.Errorf("min %d: kept %v, want %v", tc.min, res.Order, tc.keep)
		}
		for r, why := range res.Reason {
			if (why == ReasonStale) == slices.Contains(tc.keep, int32(r)) {
				t.Errorf("min %d: row %d reason %q", tc.min, r, why)
			}
		}
		if got := res.Metrics["filtered_count"]; got != float64(len(versions)-len(tc.keep)) {
			t.Errorf("min %d: filtered_count %v", tc.min, got)
		}
	}
}
