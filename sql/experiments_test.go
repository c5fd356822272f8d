package sql_test

import (
	"fmt"
	"math"
	"testing"
)

// experimentsTable is a table of two experiments (a: model_version 0 and 1,
// b: 0 and 2), ingested from experiments-a.jsonl and experiments-b.jsonl
// beside it; the expected values below are computed by hand from those rows.
const experimentsTable = "../fixtures/tables/experiments"

// TestCrossExperimentAnalyses checks the analyses comparing experiments
// against hand computation: one row per experiment (and explore step).
func TestCrossExperimentAnalyses(t *testing.T) {
	nan := math.NaN()
	for _, c := range []struct {
		name string
		want []map[string]float64 // in order; experiment a's rows first
	}{
		{"reward_by_experiment_step", []map[string]float64{
			{"model_version": 0, "rows": 2, "rewarded": 2, "reward_mean": 0.5, "reward_std": math.Sqrt(0.5), "reward_min": 0, "reward_max": 1},
			{"model_version": 1, "rows": 2, "rewarded": 2, "reward_mean": 0.75, "reward_std": math.Sqrt(0.125), "reward_min": 0.5, "reward_max": 1},
			{"model_version": 0, "rows": 1, "rewarded": 1, "reward_mean": 0.5, "reward_std": nan, "reward_min": 0.5, "reward_max": 0.5},
			{"model_version": 2, "rows": 3, "rewarded": 2, "reward_mean": 0.5, "reward_std": math.Sqrt(0.125), "reward_min": 0.25, "reward_max": 0.75},
		}},
		{"filtered_share", []map[string]float64{
			{"rows": 4, "filtered": 1, "filtered_share": 0.25},
			{"rows": 4, "filtered": 2, "filtered_share": 0.5},
		}},
		{"length_drift", []map[string]float64{ // response lengths a: 2, 4 | 6, 2; b: 3 | 1, 5, 2
			{"model_version": 0, "rows": 2, "mean_length": 3, "drift": 0},
			{"model_version": 1, "rows": 2, "mean_length": 4, "drift": 1},
			{"model_version": 0, "rows": 1, "mean_length": 3, "drift": 0},
			{"model_version": 2, "rows": 3, "mean_length": 8.0 / 3, "drift": 8.0/3 - 3},
		}},
		{"entropy_drift", []map[string]float64{ // masked tokens only
			{"model_version": 0, "rows": 2, "tokens": 5, "mean_entropy": (0.5 + 1.5 + 3) / 5, "drift": 0},
			{"model_version": 1, "rows": 2, "tokens": 8, "mean_entropy": (12 + 1.0) / 8, "drift": 13.0/8 - 1},
			{"model_version": 0, "rows": 1, "tokens": 3, "mean_entropy": 3, "drift": 0},
			{"model_version": 2, "rows": 3, "tokens": 7, "mean_entropy": (1 + 5 + 4.0) / 7, "drift": 10.0/7 - 3},
		}},
	} {
		got := run(t, experimentsTable, c.name, nil)
		if len(got) != len(c.want) {
			t.Fatalf("%s: %d rows, want %d", c.name, len(got), len(c.want))
		}
		for i, w := range c.want {
			exp := "a"
			if i >= len(c.want)/2 {
				exp = "b"
			}
			if got[i]["experiment"] != exp {
				t.Errorf("%s row %d: experiment %v, want %s", c.name, i, got[i]["experiment"], exp)
			}
			check(t, fmt.Sprintf("%s row %d", c.name, i), got[i], w)
		}
	}
}
