package main

import (
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// orphansURL is the 0.6 sample whose metadata id 7 has no blob row and
// whose blob id 19 has no metadata row.
const orphansURL = "sqlite:///../../fixtures/trinity/v0.6/edge/orphans.db?table=experience_buffer"

// The warning lines every command prints for orphansURL read with
// on_missing_blob=skip, after "CMD: warning: URL: ".
var orphanWarnings = []string{
	"table experience_buffer: skipped 1 metadata row(s) without a blob row in experience_buffer_blob (on_missing_blob=skip): id 7",
	"table experience_buffer_blob: 1 blob row(s) without a metadata row in experience_buffer, not read: id 19",
}

// TestOrphansSQLReport: sql and report on a 0.6 buffer with orphan rows
// refuse it (exit 2, naming the table and id) unless on_missing_blob=skip,
// and then print the same warning lines as convert; the report's page shows
// them too.
func TestOrphansSQLReport(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, "r.html")
	cmds := []struct {
		name string
		args func(url string) []string
	}{
		{"convert", func(url string) []string {
			return []string{"convert", url, filepath.Join(dir, "c.jsonl")}
		}},
		{"sql", func(url string) []string {
			return []string{"sql", "SELECT count(*) AS n FROM experiences", "--store", url}
		}},
		{"report", func(url string) []string { return []string{"report", url, "--out", page} }},
	}
	for _, c := range cmds {
		t.Run(c.name, func(t *testing.T) {
			_, errOut, code := runCLI(t, c.args(orphansURL)...)
			if code != 2 || !strings.Contains(errOut, "1 metadata row(s) without a blob row in experience_buffer_blob: id 7") || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
				t.Errorf("without skip: exit %d, want 2 and one line naming id 7:\n%s", code, errOut)
			}
			url := orphansURL + "&on_missing_blob=skip"
			out, errOut, code := runCLI(t, c.args(url)...)
			if code != 0 {
				t.Fatalf("with skip: exit %d: %s", code, errOut)
			}
			for _, w := range orphanWarnings {
				if line := c.name + ": warning: " + url + ": " + w; !strings.Contains(errOut, line+"\n") {
					t.Errorf("stderr lacks %q:\n%s", line, errOut)
				}
			}
			switch c.name {
			case "sql":
				if f := strings.Fields(out); len(f) != 3 || f[2] != "22" {
					t.Errorf("count: %q, want 22", out)
				}
			case "report":
				b, err := os.ReadFile(page)
				if err != nil {
					t.Fatal(err)
				}
				for _, w := range orphanWarnings {
					if !strings.Contains(string(b), `<p class="note warning">warning: `+strings.ReplaceAll(url, "&", "&amp;")+": "+w+"</p>") {
						t.Errorf("the page lacks the note %q", w)
					}
				}
			}
		})
	}
}

// TestOrphansLossMetrics: loss counts a 0.6 buffer's orphan rows in its
// --metrics and --prom files, as run does.
func TestOrphansLossMetrics(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.parquet")
	if _, stderr, code := runCLI(t, "run", "--algorithm", "grpo", "--in", sqlDemoStore, "--out", out, "--progress", "never"); code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	db := filepath.Join(dir, "b.db")
	url := "sqlite:///" + db + "?table=eb"
	if _, stderr, code := runCLI(t, "convert", out, url+"&layout=0.6"); code != 0 {
		t.Fatalf("convert: exit %d: %s", code, stderr)
	}
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"DELETE FROM eb_blob WHERE id IN (3, 5)", "DELETE FROM eb WHERE id = 9"} {
		if _, err := conn.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	conn.Close()
	metrics, prom := filepath.Join(dir, "m.json"), filepath.Join(dir, "m.prom")
	_, stderr, code := runCLI(t, "loss", "--fn", "ppo", "--in", url+"&on_missing_blob=skip", "--metrics", metrics, "--prom", prom)
	if code != 0 {
		t.Fatalf("loss: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "loss: warning: "+url+"&on_missing_blob=skip: table eb: skipped 2 metadata row(s) without a blob row in eb_blob (on_missing_blob=skip): id 3, 5\n") {
		t.Errorf("stderr:\n%s", stderr)
	}
	b, err := os.ReadFile(metrics)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]float64
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["trinity/missing_blob_skipped"] != 2 || m["trinity/orphan_blobs"] != 1 || m["actor/pg_loss"] == 0 {
		t.Errorf("metrics: %v", m)
	}
	b, err = os.ReadFile(prom)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{`rftpipe_trinity_missing_blob_skipped{job="ppo"} 2`, `rftpipe_trinity_orphan_blobs{job="ppo"} 1`} {
		if !strings.Contains(string(b), line+"\n") {
			t.Errorf("prom lacks %q:\n%s", line, b)
		}
	}
	// Without skip, the refusal names the table, not a row; with skip and
	// every blob gone, the refusal says they were all skipped.
	_, stderr, code = runCLI(t, "convert", url, filepath.Join(dir, "x.parquet"))
	if code != 2 || strings.Contains(stderr, ": row ") || !strings.Contains(stderr, "2 metadata row(s) without a blob row in eb_blob: id 3, 5") {
		t.Errorf("convert without skip: exit %d: %s", code, stderr)
	}
	conn, err = sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec("DELETE FROM eb_blob"); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	_, stderr, code = runCLI(t, "convert", url+"&on_missing_blob=skip", filepath.Join(dir, "x.parquet"))
	if code != 2 || !strings.Contains(stderr, "lacks its blob row (on_missing_blob=skip skipped them all)") {
		t.Errorf("convert with every blob gone: exit %d: %s", code, stderr)
	}
}

// TestLossOnBufferSamples: a loss step over Trinity's multi-step buffers,
// whose rows mostly lack teacher_logprobs (an input no loss term reads).
func TestLossOnBufferSamples(t *testing.T) {
	for _, db := range []string{"../../fixtures/trinity/multistep.db", "../../fixtures/trinity/v0.6/multistep.db"} {
		abs, err := filepath.Abs(db)
		if err != nil {
			t.Fatal(err)
		}
		stdout, stderr, code := runCLI(t, "loss", "--fn", "ppo", "--in", "sqlite:///"+abs+"?table=experience_buffer")
		if code != 0 || !strings.Contains(stdout, "actor/pg_loss") {
			t.Errorf("%s: exit %d: %s%s", db, code, stdout, stderr)
		}
	}
}
