package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rftpipe/rftpipe/schema/objstore/objtest"
	"github.com/rftpipe/rftpipe/schema/store"
)

// object returns the bytes of object url.
func object(t *testing.T, url string) []byte {
	t.Helper()
	b, err := store.ReadFile(url)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// putObject uploads the local file path as object url.
func putObject(t *testing.T, path, url string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.WriteFile(context.Background(), url, func(w io.Writer) error { _, err := w.Write(b); return err }); err != nil {
		t.Fatal(err)
	}
}

// metricsOf reads merged metrics JSON without the timings and status
// gauges.
func metricsOf(t *testing.T, b []byte) map[string]*float64 {
	t.Helper()
	m := map[string]*float64{}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for k := range m {
		if strings.HasPrefix(k, "time/") || strings.HasPrefix(k, "rftpipe/") {
			delete(m, k)
		}
	}
	return m
}

// TestShardedRunOnObjectStorage runs a 3-shard grpo over an s3:// input
// into an s3:// prefix, and the same job locally: every part is the local
// part byte for byte, and merge-metrics over the prefix gives the local
// merge.
func TestShardedRunOnObjectStorage(t *testing.T) {
	objtest.New(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.parquet")
	if _, stderr, code := runCLI(t, "gen", "--tasks", "36", "--runs", "4", "--tasks-per-batch", "3", "--resp-len", "8:24", "--seed", "7", "--out", in); code != 0 {
		t.Fatalf("gen: %s", stderr)
	}
	inURL, outURL := objtest.URL("in/data.parquet"), objtest.URL("runs/grpo")
	putObject(t, in, inURL)
	local := filepath.Join(dir, "out")
	const n = 3
	for i := range n {
		for _, p := range [][2]string{{in, local}, {inURL, outURL}} {
			if _, stderr, code := runCLI(t, "run", "--algorithm", "grpo", "--in", p[0], "--out", p[1], "--shards", fmt.Sprint(n), "--shard", fmt.Sprint(i), "--progress", "never"); code != 0 {
				t.Fatalf("shard %d of %s into %s: exit %d: %s", i, p[0], p[1], code, stderr)
			}
		}
		part := fmt.Sprintf("part-%d.parquet", i)
		want, err := os.ReadFile(filepath.Join(local, part))
		if err != nil {
			t.Fatal(err)
		}
		if got := object(t, outURL+"/"+part); !bytes.Equal(got, want) {
			t.Errorf("%s/%s: %d bytes, not the local part's %d", outURL, part, len(got), len(want))
		}
	}
	localMerged, merged := filepath.Join(dir, "merged.json"), objtest.URL("runs/merged.json")
	for _, a := range [][2]string{{local, localMerged}, {outURL, merged}} {
		if _, stderr, code := runCLI(t, "merge-metrics", a[0], "--metrics", a[1]); code != 0 {
			t.Fatalf("merge-metrics %s: exit %d: %s", a[0], code, stderr)
		}
	}
	lb, _ := os.ReadFile(localMerged)
	want, got := metricsOf(t, lb), metricsOf(t, object(t, merged))
	if len(want) == 0 || len(got) != len(want) {
		t.Fatalf("merged metrics: %d, local %d", len(got), len(want))
	}
	for k, w := range want {
		if g := got[k]; (g == nil) != (w == nil) || g != nil && *g != *w {
			t.Errorf("merged %s = %v, local %v", k, g, w)
		}
	}
	// The whole prefix reads as the directory store the local run wrote.
	if !slicesEqual(storeRows(t, outURL), storeRows(t, local)) {
		t.Error("the prefix of parts reads otherwise than the local directory")
	}
}

func slicesEqual(a, b []string) bool {
	return strings.Join(a, "\n") == strings.Join(b, "\n")
}

// TestObjectStorageRefusals: wrong credentials, a missing bucket and a
// denied key exit 2 with one line naming the URL and no secret.
func TestObjectStorageRefusals(t *testing.T) {
	srv := objtest.New(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.parquet")
	if _, stderr, code := runCLI(t, "gen", "--tasks", "6", "--runs", "2", "--seed", "1", "--out", in); code != 0 {
		t.Fatalf("gen: %s", stderr)
	}
	putObject(t, in, objtest.URL("in.parquet"))
	srv.Inject("", "", "denied/", objtest.Deny, -1)
	for _, c := range []struct {
		name, in, out, want string
		env                 [2]string
	}{
		{"wrong credentials", objtest.URL("in.parquet"), filepath.Join(dir, "o1.parquet"), "refused the credentials", [2]string{"AWS_ACCESS_KEY_ID", "AKIAWRONG"}},
		{"missing bucket", "s3://no-such-bucket/in.parquet", filepath.Join(dir, "o2.parquet"), "no such bucket", [2]string{}},
		{"denied key", objtest.URL("denied/in.parquet"), filepath.Join(dir, "o3.parquet"), "access denied", [2]string{}},
		{"denied output", in, objtest.URL("denied/out.parquet"), "access denied", [2]string{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.env[0] != "" {
				t.Setenv(c.env[0], c.env[1])
			}
			_, stderr, code := runCLI(t, "run", "--algorithm", "grpo", "--in", c.in, "--out", c.out, "--progress", "never")
			url := c.in
			if strings.HasPrefix(c.out, "s3://") {
				url = c.out
			}
			if code != 2 || !strings.Contains(stderr, url) || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Errorf("exit %d, stderr %q: want 2 and one line naming %s, saying %q", code, stderr, url, c.want)
			}
			for _, secret := range []string{objtest.SecretKey, "Signature", "X-Amz-"} {
				if strings.Contains(stderr, secret) {
					t.Errorf("stderr shows %q: %s", secret, stderr)
				}
			}
		})
	}
}

// TestSigtermAbortsUpload stops a command with SIGTERM while one of its
// outputs in object storage is being uploaded (its parts throttled, never
// going through): a store, and each of the small outputs (metrics,
// Prometheus file, watermark, report, query result). Exit 143, no object
// under the output's name, no upload left.
func TestSigtermAbortsUpload(t *testing.T) {
	srv := objtest.New(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.parquet")
	if _, stderr, code := runCLI(t, "gen", "--tasks", "24", "--runs", "4", "--seed", "2", "--out", in); code != 0 {
		t.Fatalf("gen: %s", stderr)
	}
	tbl := filepath.Join(dir, "table")
	if _, stderr, code := runCLI(t, "ingest", in, tbl, "--experiment", "e1"); code != 0 {
		t.Fatalf("ingest: %s", stderr)
	}
	local := func(name string) string { return filepath.Join(dir, name) }
	run := []string{"run", "--algorithm", "grpo", "--in", in, "--progress", "never"}
	for _, c := range []struct {
		name, out string // out: the object whose upload is stopped
		args      []string
	}{
		{"store", "sig/store/out.parquet", append(run, "--out", objtest.URL("sig/store/out.parquet"))},
		{"metrics", "sig/metrics/m.json", append(run, "--out", local("m.parquet"), "--metrics", objtest.URL("sig/metrics/m.json"))},
		{"prom", "sig/prom/m.prom", append(run, "--out", local("p.parquet"), "--prom", objtest.URL("sig/prom/m.prom"))},
		{"watermark", "sig/wm/_since_last/grpo.json", []string{"run", "--in", tbl, "--since-last", "--advantage-fn", "grpo", "--out", objtest.URL("sig/wm/out.parquet")}},
		{"report", "sig/report/r.html", []string{"report", "--in", in, "--out", objtest.URL("sig/report/r.html")}},
		{"sql", "sig/sql/r.csv", []string{"sql", "--store", in, "SELECT task, reward FROM experiences", "--out", objtest.URL("sig/sql/r.csv")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv.Inject("PUT", "partNumber", c.out, objtest.SlowDown, -1) // the part never goes through
			cmd := cliCmd(nil, c.args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			go func() { cmd.Wait(); close(exited) }()
			deadline := time.After(60 * time.Second)
			for !slices.Contains(srv.Uploads(t), c.out) {
				select {
				case <-exited:
					t.Fatalf("exited before an upload of %s began: %s", c.out, stderr.String())
				case <-deadline:
					cmd.Process.Kill()
					t.Fatalf("no upload of %s began: %s", c.out, stderr.String())
				case <-time.After(10 * time.Millisecond):
				}
			}
			cmd.Process.Signal(syscall.SIGTERM)
			<-exited
			if code := cmd.ProcessState.ExitCode(); code != 143 {
				t.Errorf("exit %d, want 143: %s", code, stderr.String())
			}
			if _, err := store.ReadFile(objtest.URL(c.out)); err == nil || !strings.Contains(err.Error(), "no such object") {
				t.Errorf("object after SIGTERM: %v", err)
			}
			if left := srv.Uploads(t); len(left) != 0 {
				t.Errorf("uploads left after SIGTERM: %v", left)
			}
		})
	}
}

// TestReplacePrefix reruns a sharded job into its prefix under another
// plan with --replace: the old part metrics are removed before any old
// part (merge-metrics meanwhile counts the old shards missing rather
// than merging a job whose parts are going), every old object is gone,
// and the prefix holds the new plan and part.
func TestReplacePrefix(t *testing.T) {
	srv := objtest.New(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.parquet")
	if _, stderr, code := runCLI(t, "gen", "--tasks", "12", "--runs", "4", "--seed", "9", "--out", in); code != 0 {
		t.Fatalf("gen: %s", stderr)
	}
	out := objtest.URL("replace/job")
	shard := func(n, i int, more ...string) (string, int) {
		_, stderr, code := runCLI(t, append([]string{"run", "--algorithm", "grpo", "--in", in, "--out", out, "--shards", fmt.Sprint(n), "--shard", fmt.Sprint(i), "--progress", "never"}, more...)...)
		return stderr, code
	}
	for i := range 3 {
		if stderr, code := shard(3, i); code != 0 {
			t.Fatalf("shard %d: %s", i, stderr)
		}
	}
	if stderr, code := shard(2, 0); code != 2 || !strings.Contains(stderr, "--replace") {
		t.Fatalf("another plan without --replace: exit %d: %s", code, stderr)
	}
	before := len(srv.Keys("DELETE"))
	if stderr, code := shard(2, 0, "--replace"); code != 0 {
		t.Fatalf("--replace: %s", stderr)
	}
	deleted := srv.Keys("DELETE")[before:]
	var metrics, parts []int
	for i, k := range deleted {
		switch {
		case strings.HasPrefix(k, "replace/job/_metrics/"):
			metrics = append(metrics, i)
		case strings.HasPrefix(k, "replace/job/part-"):
			parts = append(parts, i)
		}
	}
	if len(metrics) != 3 || len(parts) != 3 || metrics[2] > parts[0] {
		t.Errorf("deleted in the order %v: want the 3 part metrics before the 3 parts", deleted)
	}
	names, err := store.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(names, " "); got != "_metrics _plan.json part-0.parquet" {
		t.Errorf("the prefix holds %s, want the new plan, part and its metrics", got)
	}
	if parts, _ := store.ReadDir(out + "/_metrics"); len(parts) != 1 {
		t.Errorf("part metrics %v, want shard 0's of the new plan", parts)
	}
}

// TestOutputsOnObjectStorage writes each kind of output into object
// storage and the same locally: the object is the local file byte for
// byte (the Prometheus file without its timings, the report without the
// time it was generated). A --since-last run into object storage keeps
// its watermark there: the next run finds nothing new.
func TestOutputsOnObjectStorage(t *testing.T) {
	objtest.New(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.parquet")
	if _, stderr, code := runCLI(t, "gen", "--tasks", "24", "--runs", "4", "--seed", "3", "--out", in); code != 0 {
		t.Fatalf("gen: %s", stderr)
	}
	adv := filepath.Join(dir, "adv.parquet")
	if _, stderr, code := runCLI(t, "run", "--algorithm", "grpo", "--in", in, "--out", adv, "--progress", "never"); code != 0 {
		t.Fatalf("run: %s", stderr)
	}
	// timings drops the lines that differ from run to run.
	timings := regexp.MustCompile(`(?m)^.*(rftpipe_(duration|last_run_timestamp)|time_|generated \d{4}-).*$`)
	for _, c := range []struct {
		name string
		args []string // OUT: the output compared, SIDE: one that is not
	}{
		{"grad-out.parquet", []string{"loss", "--fn", "ppo", "--in", adv, "--format", "json", "--grad-out", "OUT"}},
		{"m.prom", []string{"run", "--algorithm", "grpo", "--in", in, "--out", "SIDE", "--prom", "OUT", "--progress", "never"}},
		{"rejected.parquet", []string{"run", "--advantage-fn", "grpo", "--operator", "reward_std_filter", "--in", in, "--out", "SIDE", "--rejected", "OUT", "--progress", "never"}},
		{"rejected.jsonl", []string{"run", "--advantage-fn", "grpo", "--operator", "reward_std_filter", "--in", in, "--out", "SIDE", "--rejected", "OUT", "--progress", "never"}},
		{"report.html", []string{"report", "--in", in, "--out", "OUT"}},
		{"q.csv", []string{"sql", "--store", in, "SELECT task, avg(reward) AS r FROM experiences GROUP BY task ORDER BY task", "--out", "OUT"}},
		{"q.parquet", []string{"sql", "--store", in, "SELECT task, avg(reward) AS r FROM experiences GROUP BY task ORDER BY task", "--out", "OUT"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			local, url := filepath.Join(dir, c.name), objtest.URL("e2e/"+c.name)
			for i, out := range []string{local, url} {
				args := slices.Clone(c.args)
				for k, a := range args {
					switch a {
					case "OUT":
						args[k] = out
					case "SIDE":
						args[k] = filepath.Join(dir, fmt.Sprintf("side-%d-%s.parquet", i, c.name))
					}
				}
				if _, stderr, code := runCLI(t, args...); code != 0 {
					t.Fatalf("%s: exit %d: %s", strings.Join(args, " "), code, stderr)
				}
			}
			want, err := os.ReadFile(local)
			if err != nil {
				t.Fatal(err)
			}
			got := object(t, url)
			if strings.HasSuffix(c.name, ".prom") || strings.HasSuffix(c.name, ".html") {
				want, got = timings.ReplaceAll(want, nil), timings.ReplaceAll(got, nil)
			}
			if len(want) == 0 || !bytes.Equal(got, want) {
				t.Errorf("%s: %d bytes, not the local file's %d", url, len(got), len(want))
			}
		})
	}
	t.Run("since-last", func(t *testing.T) {
		tbl := filepath.Join(dir, "table")
		if _, stderr, code := runCLI(t, "ingest", in, tbl, "--experiment", "e1"); code != 0 {
			t.Fatalf("ingest: %s", stderr)
		}
		out := objtest.URL("e2e/since/out.parquet")
		for i, want := range []string{"up to 1", "0 new"} {
			_, stderr, code := runCLI(t, "run", "--in", tbl, "--since-last", "--advantage-fn", "grpo", "--out", out, "--progress", "never")
			if code != 0 || !strings.Contains(stderr, want) {
				t.Fatalf("run %d: exit %d, want %q: %s", i+1, code, want, stderr)
			}
		}
		if b := object(t, objtest.URL("e2e/since/_since_last/grpo.json")); !bytes.Contains(b, []byte(`"snapshot": 1`)) {
			t.Errorf("watermark: %s", b)
		}
	})
}

// TestSQLOnObjectStorage: sql and report read a store in object storage
// (DuckDB without httpfs) and write their results there, as they do
// locally.
func TestSQLOnObjectStorage(t *testing.T) {
	objtest.New(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.parquet")
	if _, stderr, code := runCLI(t, "gen", "--tasks", "12", "--runs", "4", "--seed", "3", "--out", in); code != 0 {
		t.Fatalf("gen: %s", stderr)
	}
	inURL := objtest.URL("sql/in/data.parquet")
	putObject(t, in, inURL)
	const q = "SELECT task, avg(reward) AS r FROM experiences GROUP BY task ORDER BY task"
	for _, name := range []string{"r.csv", "r.parquet"} {
		local, remote := filepath.Join(dir, name), objtest.URL("sql/out/"+name)
		for _, a := range [][2]string{{in, local}, {objtest.URL("sql/in/"), remote}} {
			if _, stderr, code := runCLI(t, "sql", "--store", a[0], q, "--out", a[1]); code != 0 {
				t.Fatalf("sql over %s into %s: exit %d: %s", a[0], a[1], code, stderr)
			}
		}
		if name == "r.csv" {
			if want, _ := os.ReadFile(local); !bytes.Equal(object(t, remote), want) {
				t.Errorf("%s differs from the local result", remote)
			}
		} else if !slicesEqual(storeRows(t, remote), storeRows(t, local)) {
			t.Errorf("%s differs from the local result", remote)
		}
	}
	report := objtest.URL("sql/report.html")
	if _, stderr, code := runCLI(t, "report", "--in", inURL, "--out", report); code != 0 {
		t.Fatalf("report: exit %d: %s", code, stderr)
	}
	if b := object(t, report); !bytes.Contains(b, []byte("<html")) {
		t.Errorf("report object: %.100s", b)
	}
}

// TestSQLCache: sql --cache-dir reads a store in object storage from local
// copies, kept for the next query.
func TestSQLCache(t *testing.T) {
	objtest.New(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.parquet")
	if _, stderr, code := runCLI(t, "gen", "--tasks", "12", "--runs", "4", "--seed", "4", "--out", in); code != 0 {
		t.Fatalf("gen: %s", stderr)
	}
	putObject(t, in, objtest.URL("cached/part-0.parquet"))
	cache := filepath.Join(dir, "cache")
	const q = "SELECT count(*) AS n, sum(reward) AS r FROM experiences"
	want, _, code := runCLI(t, "sql", "--store", in, q, "--format", "csv")
	if code != 0 {
		t.Fatal("local sql failed")
	}
	for range 2 {
		got, stderr, code := runCLI(t, "sql", "--store", objtest.URL("cached/"), q, "--format", "csv", "--cache-dir", cache)
		if code != 0 || got != want {
			t.Fatalf("sql over the cache: exit %d, %q, want %q: %s", code, got, want, stderr)
		}
	}
	if ents, _ := os.ReadDir(cache); len(ents) != 1 || !strings.HasSuffix(ents[0].Name(), ".parquet") {
		t.Errorf("cache holds %v, want the one object's copy", ents)
	}
}
