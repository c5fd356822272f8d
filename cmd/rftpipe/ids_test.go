package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIDsHoldingSlashesAreDistinctGroups: batch "0", task "a/b" and batch
// "0/a", task "b" are two GRPO groups: rewards {1, 0} give ±1/√2, rewards
// {1, 1} give 0 (one merged group {1, 0, 1, 1} would give ±0.87 and -1.5).
func TestIDsHoldingSlashesAreDistinctGroups(t *testing.T) {
	out := filepath.Join(t.TempDir(), "o.jsonl")
	_, stderr, code := runCLI(t, "run", "--advantage-fn", "grpo", "--in", "../../fixtures/bad/slash_ids.jsonl", "--out", out, "--progress", "never")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	checkOneLine(t, stderr, "4 experiences in 2 groups")
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := []float64{0.70710576, -0.70710576, 0, 0}
	sc := bufio.NewScanner(f)
	for i := 0; sc.Scan(); i++ {
		var row struct{ Advantages []float64 }
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatal(err)
		}
		if len(row.Advantages) != 1 || row.Advantages[0] != want[i] {
			t.Errorf("row %d: advantages %v, want [%v]", i, row.Advantages, want[i])
		}
	}
}

// TestInvalidUTF8Refused: bytes that are not UTF-8 in any JSONL field are
// refused by every reader (exit 2, one line naming file, row and column)
// rather than turned into U+FFFD.
func TestInvalidUTF8Refused(t *testing.T) {
	dir := t.TempDir()
	row := func(batch, task, extra string) string {
		return `{"eid":{"batch":` + batch + `,"task":` + task + `,"run":0,"step":0},"reward":1.0,"prompt_length":1,"tokens":[1,2],"logprobs":[-0.1],"action_mask":[true]` + extra + "}\n"
	}
	cases := []struct{ name, text, col, row string }{
		{"task", row(`0`, "\"a\xff\"", ""), `column "task"`, "row 0"},
		{"batch second row", row(`0`, `"a"`, "") + row("\"\xc3\x28\"", `"a"`, ""), `column "batch"`, "row 1"},
		{"text column", row(`0`, `"a"`, `,"response_text":"ok `+"\xed\xa0\x80"+`"`), `column "response_text"`, "row 0"},
	}
	for _, tc := range cases {
		p := filepath.Join(dir, tc.name+".jsonl")
		if err := os.WriteFile(p, []byte(tc.text), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, cmd := range matrixCmds {
			t.Run(tc.name+"/"+cmd.name, func(t *testing.T) {
				_, stderr, code := runCLI(t, cmd.args(p, filepath.Join(t.TempDir(), "out.parquet"))...)
				if code != 2 {
					t.Fatalf("exit %d, want 2: %s", code, stderr)
				}
				checkOneLine(t, stderr, filepath.Base(p), tc.row, tc.col, "invalid UTF-8")
			})
		}
	}
}

// TestInspectMultiFileRows: inspect locates a bad row of a multi-file store
// by its file and its row within that file, not within the store.
func TestInspectMultiFileRows(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src := "../../fixtures/bad/null_id.jsonl" // row 1: a null task
	for _, f := range []struct{ name, query string }{
		{"a.parquet", "SELECT * FROM experiences WHERE task IS NOT NULL"}, // 1 row
		{"b.parquet", "SELECT * FROM experiences"},                        // the null at row 1
		{"c.parquet", "SELECT * FROM experiences WHERE task IS NULL"},     // the null at row 0
	} {
		if _, stderr, code := runCLI(t, "sql", "--store", src, f.query, "--out", filepath.Join(dir, f.name)); code != 0 {
			t.Fatalf("%s: %s", f.name, stderr)
		}
	}
	for _, c := range []struct {
		files []string
		want  string
	}{
		{[]string{"a.parquet", "b.parquet"}, "b.parquet: row 1: column \"task\": null id"},
		{[]string{"a.parquet", "c.parquet"}, "c.parquet: row 0: column \"task\": null id"},
	} {
		sub := filepath.Join(t.TempDir(), "s")
		os.MkdirAll(sub, 0o755)
		for _, f := range c.files {
			b, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(sub, f), b, 0o644)
		}
		_, stderr, code := runCLI(t, "inspect", sub)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, want 2 and %q: %s", c.files, code, c.want, stderr)
		}
	}
}
