package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rftpipe/rftpipe/schema/table/feed"
)

// TestGroupsWithinExperiments: over an experience table of two experiments
// with the same ids (the rows of full.parquet, ingested twice), a
// task-grouped fn (grpo), a run-grouped fn (step_wise_grpo) and
// trainer-side fns (rloo, whose uid groups come from the group pass;
// clipb, whose groups the trainer numbers while streaming) give every row
// what the fn gives it over its experiment alone
// (?where=experiment='NAME'), row for row: no group spans experiments.
func TestGroupsWithinExperiments(t *testing.T) {
	dir := t.TempDir()
	tbl := filepath.Join(dir, "table")
	src, err := os.ReadFile(stores + "full.parquet")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []string{"a", "b"} {
		in := filepath.Join(dir, e+".parquet") // another source per experiment
		if err := os.WriteFile(in, src, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := feed.Ingest(context.Background(), in, tbl, feed.Options{Experiment: e}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		fn   string
		args []string
	}{
		{"grpo", nil},
		{"step_wise_grpo", nil},
		{"rloo", nil},
		{"clipb", nil},
	} {
		t.Run(tc.fn, func(t *testing.T) {
			both := readTable(t, runFn(t, tbl, tc.fn, tc.args))
			a := readTable(t, runFn(t, tbl+"?where=experiment='a'", tc.fn, tc.args))
			b := readTable(t, runFn(t, tbl+"?where=experiment='b'", tc.fn, tc.args))
			want := slices.Concat(a.adv, b.adv)
			if len(both.adv) != len(want) || len(want) == 0 {
				t.Fatalf("%d rows over the table, %d over its experiments", len(both.adv), len(want))
			}
			for i := range want {
				if !slices.Equal(both.adv[i], want[i]) {
					t.Fatalf("row %d: advantages %v over the table, %v over its experiment alone", i, both.adv[i], want[i])
				}
			}
		})
	}
}

// runFn runs fn over in and returns the output's path.
func runFn(t *testing.T, in, fn string, args []string) string {
	t.Helper()
	job := withFn(t, Job{In: in, Out: filepath.Join(t.TempDir(), "out.parquet")}, fn, "", args...)
	run(t, job)
	return job.Out
}
