package main

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const sqlDemoStore = "../../fixtures/stores/demo.parquet"

// The README's example.
func TestSQLReadmeExample(t *testing.T) {
	out, errOut, code := runCLI(t, "sql", "SELECT task, count(*) FROM experiences GROUP BY task ORDER BY task", "--store", sqlDemoStore)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2+16 || lines[0] != "task  count_star()" || strings.Fields(lines[2])[1] != "24" {
		t.Errorf("output:\n%s", out)
	}
}

func TestSQLList(t *testing.T) {
	out, _, code := runCLI(t, "sql", "--list")
	if code != 0 {
		t.Fatal(code)
	}
	for _, name := range []string{"reward_by_batch", "pass_at_k", "group_filter", "advantage_stats", "--var std_threshold=NULL", "zero_variance"} {
		if !strings.Contains(out, name) {
			t.Errorf("--list lacks %s:\n%s", name, out)
		}
	}
}

func TestSQLCannedQueryJSON(t *testing.T) {
	out, errOut, code := runCLI(t, "sql", "--query", "group_filter", "--var", "std_threshold=0.5", "--format", "json", "--store", sqlDemoStore)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("%v:\n%s", err, out)
	}
	if rows[0]["std_threshold"] != 0.5 || rows[0]["groups"] != float64(48) {
		t.Errorf("row: %v", rows[0])
	}
}

func TestSQLOutputs(t *testing.T) {
	dir := t.TempDir()
	q := "SELECT batch, avg(reward) AS r FROM experiences GROUP BY batch ORDER BY batch"
	pq := filepath.Join(dir, "batches.parquet")
	if _, errOut, code := runCLI(t, "sql", q, "--store", sqlDemoStore, "--out", pq); code != 0 {
		t.Fatalf("parquet: exit %d: %s", code, errOut)
	}
	// Read it back as a second, named store, and write CSV to a file.
	csvOut := filepath.Join(dir, "joined.csv")
	_, errOut, code := runCLI(t, "sql", "SELECT count(*) AS n FROM experiences JOIN b USING (batch)",
		"--store", sqlDemoStore, "--store", "b="+pq, "--out", csvOut)
	if code != 0 {
		t.Fatalf("csv: exit %d: %s", code, errOut)
	}
	f, err := os.Open(csvOut)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil || len(recs) != 2 || recs[1][0] != "384" {
		t.Errorf("csv: %v %v", recs, err)
	}
	// A query from a file, over a JSONL store.
	sqlFile := filepath.Join(dir, "q.sql")
	os.WriteFile(sqlFile, []byte("-- rows\nSELECT count(*) AS n FROM experiences;\n"), 0o644)
	out, errOut, code := runCLI(t, "sql", "--file", sqlFile, "--store", "../../fixtures/stores/demo.jsonl", "--format", "csv")
	if code != 0 || out != "n\n384\n" {
		t.Errorf("--file: exit %d, %q %s", code, out, errOut)
	}
}

func TestSQLErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string // in stderr
	}{
		{[]string{"sql", "SELECT * FORM experiences", "--store", sqlDemoStore},
			[]string{`Parser Error: syntax error at or near "experiences"`, "LINE 1: SELECT * FORM experiences\n                      ^"}},
		{[]string{"sql", "SELECT nope FROM experiences", "--store", sqlDemoStore},
			[]string{"Binder Error", "LINE 1: SELECT nope FROM experiences\n               ^"}},
		{[]string{"sql", "--query", "advantage_stats", "--store", sqlDemoStore}, []string{"needs column(s) advantages", "rftpipe run"}},
		{[]string{"sql", "--query", "nope", "--store", sqlDemoStore}, []string{"unknown analysis"}},
		{[]string{"sql", "--query", "group_std", "--var", "std_threshold=1", "--store", sqlDemoStore}, []string{"no variable std_threshold", "bucket"}},
		{[]string{"sql", "SELECT 1", "--format", "parquet"}, []string{"needs --out"}},
		{[]string{"sql", "SELECT 1", "--out", sqlDemoStore, "--store", sqlDemoStore}, []string{"would overwrite the input"}},
		{[]string{"sql", "SELECT 1", "--query", "group_std"}, []string{"exactly one of"}},
		{[]string{"sql", "SELECT 1", "--store", "missing.parquet"}, []string{"no such file"}},
		{[]string{"sql", "SELECT 1", "--var", "1x=2"}, []string{"NAME=VALUE"}},
		{[]string{"sql", "SELECT 1", "--format", "xml"}, []string{"unknown format"}},
	} {
		_, errOut, code := runCLI(t, c.args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", c.args, code, errOut)
		}
		for _, w := range c.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%v: stderr %q lacks %q", c.args, errOut, w)
			}
		}
	}
}

func TestReportCommand(t *testing.T) {
	out := filepath.Join(t.TempDir(), "report.html")
	_, errOut, code := runCLI(t, "report", "--in", sqlDemoStore, "--out", out, "--std-threshold", "0.4")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "<!DOCTYPE html>") || !strings.Contains(string(b), "std_threshold = 0.4") {
		t.Errorf("report page: %.200s", b)
	}
	if st, _ := os.Stat(out); st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", st.Mode().Perm())
	}
	entries, _ := os.ReadDir(filepath.Dir(out))
	if len(entries) != 1 {
		t.Errorf("temp files left: %v", entries)
	}
	for _, args := range [][]string{
		{"report", "--in", sqlDemoStore, "--out", sqlDemoStore},
		{"report", "--out", out},
		{"report", "--in", "missing.parquet", "--out", out},
	} {
		if _, errOut, code := runCLI(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errOut)
		}
	}
}

// A canned analysis over an experience table groups within experiments: a
// and b both have batch 0 / task 0, 4 groups in all.
func TestSQLCannedQueryExperiments(t *testing.T) {
	out, errOut, code := runCLI(t, "sql", "--query", "group_filter", "--format", "json", "--store", "../../fixtures/tables/experiments")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("%v:\n%s", err, out)
	}
	if rows[0]["groups"] != float64(4) || rows[0]["singleton_groups"] != float64(1) {
		t.Errorf("row: %v", rows[0])
	}
}
