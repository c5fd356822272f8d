package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// nightlyBuffer generates 4 explore steps (batch = model_version 0..3) of 4
// tasks × 4 runs and writes each step to its own Parquet file; the rows of
// step 1 with run 0 have a null reward. It returns the files and a buffer
// URL to append them to.
func nightlyBuffer(t *testing.T, dir string) (steps []string, url string) {
	t.Helper()
	gen := filepath.Join(dir, "gen.parquet")
	if _, stderr, code := runCLI(t, "gen", "--tasks", "16", "--tasks-per-batch", "4", "--runs", "4", "--prompt-len", "4", "--resp-len", "8", "--seed", "5", "--out", gen); code != 0 {
		t.Fatalf("gen: %s", stderr)
	}
	for k := 0; k < 4; k++ {
		p := filepath.Join(dir, fmt.Sprintf("step%d.parquet", k))
		q := fmt.Sprintf("SELECT * REPLACE (CASE WHEN batch = 1 AND run = 0 THEN NULL ELSE reward END AS reward) FROM experiences WHERE batch = %d ORDER BY task, run", k)
		if _, stderr, code := runCLI(t, "sql", "--store", gen, "--format", "parquet", "--out", p, q); code != 0 {
			t.Fatalf("step %d: %s", k, stderr)
		}
		steps = append(steps, p)
	}
	return steps, "sqlite:///" + filepath.Join(dir, "buffer.db") + "?table=exp&schema_type=experience&if_exists=append"
}

// appendRows appends a store's rows (those the query selects) to the buffer.
func appendRows(t *testing.T, dir, from, query, url string) {
	t.Helper()
	part := filepath.Join(dir, "part.parquet")
	if _, stderr, code := runCLI(t, "sql", "--store", from, "--format", "parquet", "--out", part, query); code != 0 {
		t.Fatalf("select: %s", stderr)
	}
	if _, stderr, code := runCLI(t, "convert", part, url); code != 0 {
		t.Fatalf("convert: %s", stderr)
	}
}

// TestSinceLastNightly runs three nightly rounds (a step written to the
// buffer, ingest, run --since-last; the table compacted before the last
// run): their outputs together are the rows of one run over the whole
// table. A run that fails leaves the watermark;
// a run with nothing ingested since writes nothing and says 0 new.
func TestSinceLastNightly(t *testing.T) {
	dir := t.TempDir()
	steps, url := nightlyBuffer(t, dir)
	tbl := filepath.Join(dir, "table")
	mark := filepath.Join(dir, "out", "_since_last", "grpo.json")
	run := func(out string, args ...string) (string, int) {
		_, stderr, code := runCLI(t, append([]string{"run", "--in", tbl, "--since-last", "--advantage-fn", "grpo", "--out", filepath.Join(dir, "out", out)}, args...)...)
		return stderr, code
	}
	var nightly []string
	for k := 0; k < 3; k++ {
		appendRows(t, dir, steps[k], "SELECT * FROM experiences", url)
		if _, stderr, code := runCLI(t, "ingest", url, tbl, "--experiment", "e"); code != 0 {
			t.Fatalf("ingest %d: %s", k, stderr)
		}
		out := fmt.Sprintf("night%d.parquet", k)
		if k == 2 { // compaction merges the new data file with the read ones: the run still reads only the new rows
			if _, stderr, code := runCLI(t, "compact", tbl); code != 0 {
				t.Fatalf("compact: %s", stderr)
			}
		}
		if k == 1 { // step 1 has null rewards: the run fails, the watermark stays
			before, err := os.ReadFile(mark)
			if err != nil {
				t.Fatal(err)
			}
			if stderr, code := run(out); code != 2 {
				t.Fatalf("run over null rewards: exit %d, want 2\n%s", code, stderr)
			}
			if after, err := os.ReadFile(mark); err != nil || string(after) != string(before) {
				t.Fatalf("a failed run moved the watermark:\n%s\nto\n%s (%v)", before, after, err)
			}
		}
		stderr, code := run(out, "--on-invalid-reward", "drop")
		from, to := k, k+1 // round k's ingest is snapshot k+1, the compaction 4
		if k == 2 {
			to = 4
		}
		if want := fmt.Sprintf("ingested after snapshot %d, up to %d", from, to); code != 0 || !strings.Contains(stderr, want) {
			t.Fatalf("night %d: exit %d, want %q\n%s", k, code, want, stderr)
		}
		nightly = append(nightly, storeRows(t, filepath.Join(dir, "out", out))...)
	}
	stderr, code := run("night3.parquet", "--on-invalid-reward", "drop")
	if code != 0 || !strings.Contains(stderr, "run: 0 new") {
		t.Fatalf("rerun with nothing new: exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "out", "night3.parquet")); !os.IsNotExist(err) {
		t.Fatalf("rerun with nothing new wrote an output (%v)", err)
	}
	all := filepath.Join(dir, "all.parquet")
	if _, stderr, code := runCLI(t, "run", "--in", tbl, "--advantage-fn", "grpo", "--on-invalid-reward", "drop", "--out", all); code != 0 {
		t.Fatalf("run over the table: %s", stderr)
	}
	slices.Sort(nightly)
	if want := storeRows(t, all); len(want) != 44 || !slices.Equal(nightly, want) {
		t.Fatalf("the nightly outputs hold %d rows, one run over the table %d: not the same rows", len(nightly), len(want))
	}
}

// TestSinceLastSplitStep ingests a buffer while step 1 is half written: the
// next run leaves out the rest of step 1, warning, and reads step 2 whole.
func TestSinceLastSplitStep(t *testing.T) {
	dir := t.TempDir()
	steps, url := nightlyBuffer(t, dir)
	tbl := filepath.Join(dir, "table")
	appendRows(t, dir, steps[0], "SELECT * FROM experiences", url)
	appendRows(t, dir, steps[2], "SELECT * FROM experiences WHERE task % 2 = 0", url)
	round := func(out string) string {
		if _, stderr, code := runCLI(t, "ingest", url, tbl, "--experiment", "e"); code != 0 {
			t.Fatalf("ingest: %s", stderr)
		}
		_, stderr, code := runCLI(t, "run", "--in", tbl, "--since-last", "--advantage-fn", "grpo", "--out", filepath.Join(dir, out))
		if code != 0 {
			t.Fatalf("run: %s", stderr)
		}
		return stderr
	}
	round("night0.parquet")
	appendRows(t, dir, steps[2], "SELECT * FROM experiences WHERE task % 2 = 1", url)
	appendRows(t, dir, steps[3], "SELECT * FROM experiences", url)
	stderr := round("night1.parquet")
	if want := `experiment "e": explore steps (model_version) 2 have rows at or before snapshot 1`; !strings.Contains(stderr, want) {
		t.Fatalf("no warning %q:\n%s", want, stderr)
	}
	got := storeRows(t, filepath.Join(dir, "night1.parquet"))
	all := filepath.Join(dir, "all.parquet")
	if _, stderr, code := runCLI(t, "run", "--in", tbl, "--advantage-fn", "grpo", "--out", all); code != 0 {
		t.Fatalf("run over the table: %s", stderr)
	}
	var want []string
	for _, r := range storeRows(t, all) {
		if strings.HasPrefix(r, "batch=3;") {
			want = append(want, r)
		}
	}
	if len(want) != 16 || !slices.Equal(got, want) {
		t.Fatalf("night 1 read %d rows, want step 3's %d:\n%v", len(got), len(want), got)
	}
}

// TestSinceLastWatermarkChecked: the watermark is an output like any
// other: a link to nothing where it goes is refused before any work (no
// output written), and the link is left as it was.
func TestSinceLastWatermarkChecked(t *testing.T) {
	dir := t.TempDir()
	tbl := filepath.Join(dir, "table")
	if _, stderr, code := runCLI(t, "ingest", "../../fixtures/stores/demo.parquet", tbl, "--experiment", "e"); code != 0 {
		t.Fatalf("ingest: exit %d: %s", code, stderr)
	}
	if err := os.MkdirAll(filepath.Join(dir, "_since_last"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "_since_last", "grpo.json")
	if err := os.Symlink(filepath.Join(tbl, "data", "mark.json"), link); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runCLI(t, "run", "--in", tbl, "--since-last", "--advantage-fn", "grpo", "--out", filepath.Join(dir, "out.parquet"), "--progress", "never")
	if code != 2 || !strings.Contains(stderr, "grpo.json") {
		t.Errorf("exit %d, want 2 naming the watermark: %s", code, stderr)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "out.parquet")); err == nil {
		t.Error("the refused run wrote its output")
	}
}
