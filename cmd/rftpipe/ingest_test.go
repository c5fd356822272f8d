package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIngestEndToEnd ingests a Trinity buffer into a table with its
// config, reruns (0 new), and reads the table with sql (the views
// experiences and experiments, a where), run and inspect; DuckDB reads a
// data file alone as plain Parquet; bad input is one line, exit 2.
func TestIngestEndToEnd(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "b.db")
	copyFile(t, "../../fixtures/trinity/experience.db", db)
	buf := "sqlite:///" + db + "?table=experience_buffer"
	tbl := filepath.Join(dir, "table")
	cfg := filepath.Join(dir, "cfg.yaml")
	if err := os.WriteFile(cfg, []byte("project: p\nname: n1\nalgorithm:\n  algorithm_type: grpo\n  repeat_times: 8\n  optimizer:\n    lr: 1e-6\nmodel:\n  model_path: /models/q\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runCLI(t, "ingest", buf, tbl, "--experiment", "e1", "--experiment-config", cfg)
	if code != 0 || !strings.Contains(stderr, "ingest: 64 new") {
		t.Fatalf("ingest: exit %d\n%s", code, stderr)
	}
	_, stderr, code = runCLI(t, "ingest", buf, tbl, "--experiment", "e1")
	if code != 0 || !strings.Contains(stderr, "ingest: 0 new") {
		t.Fatalf("rerun: exit %d\n%s", code, stderr)
	}

	out, stderr, code := runCLI(t, "sql", "--store", tbl, "--format", "csv", "SELECT experiment, algorithm_type, repeat_times, learning_rate, model_path, project, name, first_step, last_step, rows FROM experiments")
	if want := "experiment,algorithm_type,repeat_times,learning_rate,model_path,project,name,first_step,last_step,rows\ne1,grpo,8,1e-6,/models/q,p,n1,0,1,64\n"; code != 0 || out != want {
		t.Fatalf("experiments: exit %d\n%s%s\nwant\n%s", code, out, stderr, want)
	}
	out, stderr, code = runCLI(t, "sql", "--store", tbl+"?where=experiment = 'e1'", "--format", "csv", "SELECT count(*) AS n, count(reward) AS rewards FROM experiences WHERE experiment = 'e1'")
	if code != 0 || out != "n,rewards\n64,60\n" {
		t.Fatalf("experiences: exit %d\n%s%s", code, out, stderr)
	}
	data, err := filepath.Glob(filepath.Join(tbl, "data", "experiment=e1", "*.parquet"))
	if err != nil || len(data) != 1 {
		t.Fatalf("data files: %v %v", data, err)
	}
	out, stderr, code = runCLI(t, "sql", "--store", data[0], "--format", "csv", "SELECT count(*) AS n, min(experiment) AS e FROM experiences")
	if code != 0 || out != "n,e\n64,e1\n" {
		t.Fatalf("DuckDB on a data file: exit %d\n%s%s", code, out, stderr)
	}
	if _, stderr, code = runCLI(t, "run", "--in", tbl, "--advantage-fn", "grpo", "--on-invalid-reward", "drop", "--out", filepath.Join(dir, "out.parquet")); code != 0 {
		t.Fatalf("run over the table: exit %d\n%s", code, stderr)
	}
	if out, stderr, code = runCLI(t, "inspect", tbl+"?as_of=1"); code != 0 || !strings.Contains(out+stderr, "64") {
		t.Fatalf("inspect: exit %d\n%s%s", code, out, stderr)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sql", "--store", tbl + "?where=reward > 0", "SELECT 1"}, "a table prunes its files by experiment and model_version only"},
		{[]string{"inspect", tbl + "?as_of=7"}, "no snapshot 7"},
		{[]string{"ingest", tbl, filepath.Join(dir, "t2"), "--experiment", "x"}, "ingest reads buffers and stores, not tables"},
		{[]string{"ingest", buf, dir, "--experiment", "x"}, "not empty"},
		{[]string{"ingest", "sqlite:///../../fixtures/trinity/dpo.db?table=dpo_buffer", tbl, "--experiment", "d"}, `column "task": type int64 here, utf8 in table`},
	} {
		_, stderr, code := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d\n%s\nwant exit 2 and one line with %q", c.args, code, stderr, c.want)
		}
	}
}
