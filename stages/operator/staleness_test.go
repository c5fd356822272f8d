package operator

import (
	"slices"
	"testing"
)

// TestStaleness: rows below the minimum version, and null versions (-1),
// are dropped as stale; the others are kept in input order.
func TestStaleness(t *testing.T) {
	versions := []int64{3, 0, 5, -1, 4, 2}
	for _, tc := range []struct {
		min  int64
		keep []int32
	}{
		{0, []int32{0, 1, 2, 4, 5}},
		{3, []int32{0, 2, 4}},
		{5, []int32{2}},
		{6, nil},
	} {
		in := &Input{Reward: make([]float64, len(versions)), ModelVersion: versions}
		res, err := Staleness{MinVersion: tc.min}.Apply(in)
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
