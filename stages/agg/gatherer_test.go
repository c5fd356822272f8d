package agg

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestGathererMatchesGather checks that the columnar Gatherer and the map
// based Gather agree on the same per-group metrics, missing values and NaNs
// included.
func TestGathererMatchesGather(t *testing.T) {
	names := []string{"reward_mean", "reward_std", "drop"}
	tests := []struct {
		name   string
		groups int
		pMiss  float64
		pNaN   float64
	}{
		{"empty", 0, 0, 0},
		{"dense", 7, 0, 0},
		{"missing values", 20, 0.3, 0},
		{"nan values", 20, 0, 0.3},
		{"all missing", 5, 1, 0},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := NewGatherer(names...)
			var maps []Metrics
			for i := 0; i < tc.groups; i++ {
				m := Metrics{}
				for c, n := range names {
					if rng.Float64() < tc.pMiss {
						continue
					}
					v := rng.NormFloat64()
					if rng.Float64() < tc.pNaN {
						v = math.NaN()
					}
					m[n] = v
					g.Add(c, v)
				}
				maps = append(maps, m)
			}
			got, want := g.Metrics("group_advantages"), Gather(maps, "group_advantages")
			if len(got) != len(want) {
				t.Fatalf("got %d metrics %v, want %d %v", len(got), got, len(want), want)
			}
			for k, w := range want {
				if got[k] != w {
					t.Errorf("%s: got %v, want %v", k, got[k], w)
				}
			}
		})
	}
}
