package sql_test

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"

	rsql "github.com/rftpipe/rftpipe/sql"
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

// TestExperimentGroups checks that the analyses grouping rows into tasks
// keep each group within its experiment: on the table, a's batch 0 / task 0
// (rewards 1, 0) and b's (0.5) are two groups, with a's batch 1 (1, 0.5) and
// b's batch 2 (0.25, 0.75 and a null) 4 in all, as computed by hand.
func TestExperimentGroups(t *testing.T) {
	got := run(t, experimentsTable, "group_filter", map[string]string{"std_threshold": "0.4"})
	check(t, "group_filter", got[0], map[string]float64{
		"groups": 4, "rows": 7, "invalid_rewards": 1, "singleton_groups": 1, "zero_variance_groups": 0,
		"dropped_groups": 3, "dropped_group_share": 0.75, "dropped_rows": 5, "dropped_row_share": 5.0 / 7,
	})

	// stds: a's batch 0 √0.5, a's batch 1 and b's batch 2 √0.125; b's batch 0 a singleton.
	got = run(t, experimentsTable, "group_std", map[string]string{"bucket": "0.1"})
	want := []struct {
		label  string
		groups float64
	}{{"[0.3, 0.4)", 2}, {"[0.7, 0.8)", 1}, {"singleton", 1}, {"invalid rewards (rows)", 1}}
	if len(got) != len(want) {
		t.Fatalf("group_std: %d rows %v, want %d", len(got), got, len(want))
	}
	for i, w := range want {
		if got[i]["std_range"] != w.label {
			t.Errorf("group_std row %d: %v, want %s", i, got[i]["std_range"], w.label)
		}
		share := w.groups / 4
		if i == 3 {
			share = math.NaN()
		}
		check(t, w.label, got[i], map[string]float64{"groups": w.groups, "share": share})
	}

	got = run(t, experimentsTable, "reward_by_batch", nil)
	for i, w := range []map[string]float64{
		{"batch": 0, "rows": 3, "tasks": 2, "rewarded": 3},
		{"batch": 1, "rows": 2, "tasks": 1, "rewarded": 2},
		{"batch": 2, "rows": 3, "tasks": 1, "rewarded": 2},
	} {
		check(t, fmt.Sprint("reward_by_batch row ", i), got[i], w)
	}
}

// TestExperimentTasks runs the per-task analyses over a store whose two
// experiments share batch 0 / task 0 / runs 0 and 1: a's rewards 1, 1 (run
// 1 a duplicate of row 0), b's 0, 0. Each is its own task, zero-variance,
// with pass@2 1 and 0.
func TestExperimentTasks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "two.parquet")
	if _, err := openDB(t, demoStore).Exec(`COPY (SELECT * FROM (VALUES
			('a', 0, 0, 0, 0, 1.0, NULL::BIGINT, 'r', 'op'),
			('a', 0, 0, 1, 0, 1.0, 0, 'r', 'op'),
			('b', 0, 0, 0, 0, 0.0, NULL, 'r', 'op'),
			('b', 0, 0, 1, 0, 0.0, NULL, 'r', 'op'))
			AS t(experiment, batch, task, run, step, reward, duplicate_of, drop_reason, dropped_by))
			TO '` + path + `' (FORMAT parquet)`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		want []map[string]float64 // in order; experiment a's rows first
	}{
		{"zero_variance", []map[string]float64{{"rows": 2, "reward": 1}, {"rows": 2, "reward": 0}}},
		{"pass_at_k", []map[string]float64{{"runs": 2, "successes": 2, "pass_at_k": 1}, {"runs": 2, "successes": 0, "pass_at_k": 0}}},
		{"duplicates", []map[string]float64{{"groups": 2, "duplicated_groups": 1}, {"groups": 2, "duplicated_groups": 1}}},
		{"drop_reasons", []map[string]float64{{"rows": 4, "groups": 2}, {"rows": 4, "groups": 2}}},
	} {
		got := run(t, path, c.name, nil)
		if len(got) != len(c.want) {
			t.Fatalf("%s: %d rows %v, want %d", c.name, len(got), got, len(c.want))
		}
		for i, w := range c.want {
			if e, ok := got[i]["experiment"]; ok && e != []string{"a", "b"}[i] {
				t.Errorf("%s row %d: experiment %v", c.name, i, e)
			}
			check(t, fmt.Sprintf("%s row %d", c.name, i), got[i], w)
		}
	}
}

func TestGroupKey(t *testing.T) {
	for _, c := range []struct {
		cols []string
		want string
	}{
		{[]string{"batch", "task", "reward"}, "batch, task"},
		{[]string{"reward", "experiment", "task", "batch"}, "experiment, batch, task"},
	} {
		if got := rsql.GroupKey(c.cols); got != c.want {
			t.Errorf("GroupKey(%v) = %q, want %q", c.cols, got, c.want)
		}
	}
}
