package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rftpipe/rftpipe/pipeline/algorithm"
	"github.com/rftpipe/rftpipe/schema/store"
)

// unshardable are the presets whose results depend on rows of more than one
// batch: a sharded run of them is refused.
var unshardable = map[string]string{
	"ppo":               "ppo whitens over the whole trainer batch",
	"reinforceplusplus": "reinforceplusplus whitens over the whole trainer batch",
	"gigpo":             "gigpo's anchor groups (info.env_state_hash) span every batch of the input",
}

// storeRows returns every row of a store rendered as JSON (one string per
// row, columns in schema order), sorted: the store's rows as a multiset.
func storeRows(t *testing.T, path string) []string {
	t.Helper()
	r, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var rows []string
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			var b strings.Builder
			for c, col := range rec.Columns() {
				v, err := json.Marshal(col.GetOneForMarshal(i))
				if err != nil {
					t.Fatalf("row %d column %s: %v", i, rec.ColumnName(c), err)
				}
				fmt.Fprintf(&b, "%s=%s;", rec.ColumnName(c), v)
			}
			rows = append(rows, b.String())
		}
	}
	slices.Sort(rows)
	return rows
}

// readMetrics reads a metrics JSON file, leaving out the timings and the
// status gauges (which no two runs share).
func readMetrics(t *testing.T, path string) map[string]*float64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
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

// TestShardedPresetsMatchSingleRun runs every preset over a 16-batch store
// once, then as N = 1, 3 and 8 shards in parallel child processes (the index
// in JOB_COMPLETION_INDEX, as Kubernetes sets it): the parts hold the single
// run's rows with the same values, and merge-metrics gives its metrics —
// counts exactly, means within 1e-12 relative. The presets that need more
// than one batch are refused, naming why.
func TestShardedPresetsMatchSingleRun(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 273 runs")
	}
	dir := t.TempDir()
	full, pairs := filepath.Join(dir, "full.parquet"), filepath.Join(dir, "pairs.parquet")
	for _, args := range [][]string{
		{"gen", "--tasks", "48", "--runs", "4", "--tasks-per-batch", "3", "--resp-len", "8:24", "--reward", "uniform", "--with", "all", "--seed", "11", "--out", full},
		{"gen", "--kind", "pairs", "--tasks", "48", "--tasks-per-batch", "3", "--resp-len", "8:24", "--with", "logprob,ref_logprob", "--seed", "12", "--out", pairs},
	} {
		if _, stderr, code := runCLI(t, args...); code != 0 {
			t.Fatalf("gen: %s", stderr)
		}
	}
	for _, name := range algorithm.Default().Names() {
		t.Run(name, func(t *testing.T) {
			in := full
			if name == "dpo" {
				in = pairs
			}
			tmp := t.TempDir()
			single := filepath.Join(tmp, "single.parquet")
			if _, stderr, code := runCLI(t, "run", "--algorithm", name, "--in", in, "--out", single,
				"--metrics", filepath.Join(tmp, "single.json"), "--progress", "never"); code != 0 {
				t.Fatalf("single run: exit %d: %s", code, stderr)
			}
			want := storeRows(t, single)
			wantM := readMetrics(t, filepath.Join(tmp, "single.json"))
			for _, n := range []int{1, 3, 8} {
				out := filepath.Join(tmp, fmt.Sprintf("out%d", n))
				errs := make([]string, n)
				codes := make([]int, n)
				var wg sync.WaitGroup
				for i := 0; i < n; i++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						cmd := cliCmd([]string{fmt.Sprintf("JOB_COMPLETION_INDEX=%d", i)},
							"run", "--algorithm", name, "--in", in, "--out", out, "--shards", fmt.Sprint(n), "--progress", "never")
						b, err := cmd.CombinedOutput()
						errs[i] = string(b)
						if err != nil {
							codes[i] = cmd.ProcessState.ExitCode()
						}
					}()
				}
				wg.Wait()
				if why, ok := unshardable[name]; ok {
					for i := range n {
						if codes[i] != 2 || !strings.Contains(errs[i], "cannot be sharded: "+why) {
							t.Fatalf("N=%d shard %d: exit %d, want a refusal (%s): %s", n, i, codes[i], why, errs[i])
						}
					}
					continue
				}
				for i := range n {
					if codes[i] != 0 {
						t.Fatalf("N=%d shard %d: exit %d: %s", n, i, codes[i], errs[i])
					}
				}
				if got := storeRows(t, out); !slices.Equal(got, want) {
					t.Fatalf("N=%d: %d rows, the single run %d; first difference: %s", n, len(got), len(want), firstDiff(got, want))
				}
				merged := filepath.Join(tmp, fmt.Sprintf("merged%d.json", n))
				if _, stderr, code := runCLI(t, "merge-metrics", out, "--metrics", merged); code != 0 {
					t.Fatalf("merge-metrics: exit %d: %s", code, stderr)
				}
				compareMetrics(t, n, readMetrics(t, merged), wantM)
			}
		})
	}
}

func firstDiff(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("\n sharded %s\n single  %s", a[i], b[i])
		}
	}
	return "(one is a prefix of the other)"
}

// compareMetrics: the same names; counts equal, the others within 1e-12
// relative.
func compareMetrics(t *testing.T, n int, got, want map[string]*float64) {
	t.Helper()
	if len(want) == 0 {
		return
	}
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			t.Errorf("N=%d: merged metrics lack %s", n, k)
		case (g == nil) != (w == nil):
			t.Errorf("N=%d: %s = %v, single run %v", n, k, g, w)
		case g == nil:
		case strings.HasSuffix(k, "_count") && *g != *w:
			t.Errorf("N=%d: count %s = %v, single run %v", n, k, *g, *w)
		case math.Abs(*g-*w) > 1e-12*math.Abs(*w):
			t.Errorf("N=%d: %s = %.17g, single run %.17g", n, k, *g, *w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("N=%d: merged metric %s is not the single run's", n, k)
		}
	}
}

// TestShardRefusalsAndMissingParts: fn arguments that need more than one
// batch refuse --shards naming themselves, as does the loss; merge-metrics
// lists the parts not yet written (exit 1); the output directory reads as
// a store (its _metrics folder left out).
func TestShardRefusalsAndMissingParts(t *testing.T) {
	in := "../../fixtures/stores/demo.parquet"
	out := filepath.Join(t.TempDir(), "out")
	for _, c := range []struct{ args []string }{
		{[]string{"run", "--advantage-fn", "grpo", "--arg", "std_cal_level=batch"}},
		{[]string{"run", "--advantage-fn", "grpo", "--arg", "std_threshold=0", "--arg", "duplicate_experiences=true"}},
		{[]string{"run", "--advantage-fn", "rec", "--arg", "drop=balance"}},
		{[]string{"run", "--add-strategy", "duplicate_informative"}},
		{[]string{"loss", "--fn", "ppo"}},
	} {
		args := append(c.args, "--in", in, "--out", out, "--shards", "2", "--shard", "0")
		if c.args[0] == "loss" {
			args = append(c.args, "--in", "../../fixtures/stores/full.parquet", "--shards", "2", "--shard", "0")
		}
		_, stderr, code := runCLI(t, args...)
		if code != 2 || !strings.Contains(stderr, "cannot be sharded") {
			t.Errorf("%v: exit %d, want a refusal: %s", c.args, code, stderr)
		}
	}
	for _, bad := range [][]string{{"--shards", "2"}, {"--shards", "2", "--shard", "2"}, {"--shard", "1"}, {"--shards", "0", "--shard", "0"}} {
		args := append([]string{"run", "--advantage-fn", "grpo", "--in", in, "--out", out}, bad...)
		if _, stderr, code := runCLI(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2: %s", bad, code, stderr)
		}
	}
	if _, stderr, code := runCLI(t, "run", "--advantage-fn", "grpo", "--in", in, "--out", out, "--shards", "3", "--shard", "1"); code != 0 {
		t.Fatal(stderr)
	}
	_, stderr, code := runCLI(t, "merge-metrics", out)
	if code != 1 || !strings.Contains(stderr, "2 of 3 parts missing: 0, 2") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if stdout, stderr, code := runCLI(t, "inspect", out, "--format", "json"); code != 0 || !strings.Contains(stdout, `"rows"`) {
		t.Fatalf("inspect OUT: exit %d: %s%s", code, stdout, stderr)
	}
	if stdout, stderr, code := runCLI(t, "sql", "SELECT count(*) AS n FROM experiences", "--store", out, "--format", "csv"); code != 0 || !strings.Contains(stdout, "n\n") {
		t.Fatalf("sql OUT: exit %d: %s%s", code, stdout, stderr)
	}
	if _, stderr, code := runCLI(t, "run", "--advantage-fn", "grpo", "--in", out, "--out", filepath.Join(t.TempDir(), "again.parquet")); code != 0 {
		t.Fatalf("run over OUT: %s", stderr)
	}
}

// TestShardPlan: an output directory of parts records its plan (N, input,
// job) and refuses another, naming the difference, unless --replace
// replaces it whole; the same plan's shards run into it again; merge-metrics
// refuses parts of another plan; a failed first shard leaves no directory.
func TestShardPlan(t *testing.T) {
	in := "../../fixtures/stores/demo.parquet"
	tmp := t.TempDir()
	out := filepath.Join(tmp, "out")
	grpo := func(extra ...string) []string {
		return append([]string{"run", "--advantage-fn", "grpo", "--in", in, "--out", out, "--progress", "never"}, extra...)
	}
	for _, i := range []string{"0", "1"} {
		if _, stderr, code := runCLI(t, grpo("--shards", "2", "--shard", i)...); code != 0 {
			t.Fatalf("shard %s: %s", i, stderr)
		}
	}
	if _, stderr, code := runCLI(t, grpo("--shards", "2", "--shard", "1")...); code != 0 {
		t.Fatalf("same plan, shard 1 again: %s", stderr)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{grpo("--shards", "3", "--shard", "0"), "shards: 2, not 3"},
		{[]string{"run", "--advantage-fn", "rloo", "--in", in, "--out", out, "--shards", "2", "--shard", "0"}, "advantage_fn=grpo, not advantage_fn=rloo"},
		{grpo("--shards", "2", "--shard", "0", "--arg", "epsilon=0.01"), "job: (none), not arg epsilon=0.01"},
		{grpo("--shards", "2", "--shard", "0", "--seed", "7"), "seed=7"},
		{[]string{"run", "--advantage-fn", "grpo", "--in", "../../fixtures/stores/full.parquet", "--out", out, "--shards", "2", "--shard", "0"}, "input: "},
	} {
		_, stderr, code := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(stderr, "another plan") || !strings.Contains(stderr, c.want) || !strings.Contains(stderr, "--replace") {
			t.Errorf("%v: exit %d, want a refusal naming %q: %s", c.args, code, c.want, stderr)
		}
	}
	if _, stderr, code := runCLI(t, "merge-metrics", out); code != 0 {
		t.Fatalf("merge-metrics after refusals: exit %d: %s", code, stderr)
	}
	// A part of another plan smuggled in is refused by merge-metrics.
	other := filepath.Join(tmp, "other")
	if _, stderr, code := runCLI(t, "run", "--advantage-fn", "rloo", "--in", in, "--out", other, "--shards", "2", "--shard", "0"); code != 0 {
		t.Fatal(stderr)
	}
	b, err := os.ReadFile(filepath.Join(other, "_metrics", "part-0.json"))
	if err != nil {
		t.Fatal(err)
	}
	mixed := filepath.Join(tmp, "mixed")
	if err := os.CopyFS(mixed, os.DirFS(out)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mixed, "_metrics", "part-0.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := runCLI(t, "merge-metrics", mixed); code != 2 || !strings.Contains(stderr, "part-0.json") || !strings.Contains(stderr, "another plan") {
		t.Errorf("merge-metrics over a part of another plan: exit %d: %s", code, stderr)
	}
	// --replace: the directory of 2 parts becomes one of 3 plan, its old
	// parts gone.
	if _, stderr, code := runCLI(t, grpo("--shards", "3", "--shard", "2", "--replace")...); code != 0 {
		t.Fatalf("--replace: %s", stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "part-0.parquet")); !os.IsNotExist(err) {
		t.Errorf("--replace kept the old plan's part-0.parquet (%v)", err)
	}
	if _, stderr, code := runCLI(t, "merge-metrics", out); code != 1 || !strings.Contains(stderr, "2 of 3 parts missing: 0, 1") {
		t.Errorf("after --replace: exit %d: %s", code, stderr)
	}
	// A directory of parts with no plan is refused.
	bare := filepath.Join(tmp, "bare")
	os.MkdirAll(bare, 0o755)
	os.WriteFile(filepath.Join(bare, "part-0.parquet"), []byte("x"), 0o644)
	if _, stderr, code := runCLI(t, "run", "--advantage-fn", "grpo", "--in", in, "--out", bare, "--shards", "2", "--shard", "1"); code != 2 || !strings.Contains(stderr, "part-0.parquet but no plan") {
		t.Errorf("directory without a plan: exit %d: %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, "run", "--advantage-fn", "grpo", "--in", in, "--out", out, "--replace"); code != 2 {
		t.Errorf("--replace without --shards: exit %d: %s", code, stderr)
	}
	// A first shard that fails leaves no directory behind.
	bad := filepath.Join(tmp, "bad")
	if _, stderr, code := runCLI(t, "run", "--advantage-fn", "grpo", "--in", "../../fixtures/bad/garbage.parquet", "--out", bad, "--shards", "2", "--shard", "0"); code == 0 {
		t.Fatalf("bad input ran: %s", stderr)
	}
	if _, err := os.Stat(bad); !os.IsNotExist(err) {
		t.Errorf("a failed first shard left %s (%v)", bad, err)
	}
}

// TestShardSideFiles: a sharded run's plan and part metrics are outputs
// like any other (another output naming them is refused, nothing written),
// and --rejected is a directory of parts, each shard writing its own.
func TestShardSideFiles(t *testing.T) {
	dir := t.TempDir()
	parts := filepath.Join(dir, "parts")
	run := func(extra ...string) (string, int) {
		args := append([]string{"run", "--advantage-fn", "grpo", "--arg", "std_threshold=0", "--in", "../../fixtures/stores/demo.parquet",
			"--out", parts, "--shards", "2", "--progress", "never"}, extra...)
		_, stderr, code := runCLI(t, args...)
		return stderr, code
	}
	for _, side := range []string{filepath.Join(parts, "_plan.json"), filepath.Join(parts, "_metrics", "part-0.json")} {
		stderr, code := run("--shard", "0", "--metrics", side)
		if code != 2 || !strings.Contains(stderr, "--metrics") {
			t.Fatalf("--metrics %s: exit %d, %q; want 2, refused", side, code, stderr)
		}
		if _, err := os.Stat(parts); err == nil {
			t.Fatalf("a refused run made %s", parts)
		}
	}
	if stderr, code := run("--shard", "0", "--rejected", filepath.Join(dir, "rej.parquet")); code != 2 || !strings.Contains(stderr, "directory of parts") {
		t.Fatalf("--rejected FILE with --shards: exit %d, %q; want 2", code, stderr)
	}
	rej := filepath.Join(dir, "rej")
	total := 0
	for i := 0; i < 2; i++ {
		if stderr, code := run("--shard", fmt.Sprint(i), "--rejected", rej); code != 0 {
			t.Fatalf("shard %d: exit %d: %s", i, code, stderr)
		}
		n := len(storeRows(t, filepath.Join(rej, fmt.Sprintf("part-%d.parquet", i))))
		if n == 0 {
			t.Fatalf("shard %d rejected no row (std_threshold=0 drops the zero-variance groups)", i)
		}
		total += n
	}
	_, stderr, code := runCLI(t, "run", "--advantage-fn", "grpo", "--arg", "std_threshold=0", "--in", "../../fixtures/stores/demo.parquet",
		"--out", filepath.Join(dir, "whole.parquet"), "--rejected", filepath.Join(dir, "whole_rej.parquet"), "--progress", "never")
	if code != 0 {
		t.Fatal(stderr)
	}
	if want := len(storeRows(t, filepath.Join(dir, "whole_rej.parquet"))); total != want {
		t.Fatalf("the shards rejected %d rows, the whole run %d", total, want)
	}
	// The output store's flag is named when another output repeats it.
	_, stderr, code = runCLI(t, "run", "--advantage-fn", "grpo", "--in", "../../fixtures/stores/demo.parquet",
		"--out", filepath.Join(dir, "o.parquet"), "--metrics", filepath.Join(dir, "o.parquet"), "--progress", "never")
	if code != 2 || !strings.Contains(stderr, "file of --out") {
		t.Fatalf("--metrics = --out: exit %d, %q", code, stderr)
	}
}

// TestShardRejectedDirectory: a sharded run's --rejected directory of parts
// is owned like --out's: neither lies inside the other (refused before any
// work, through a symbolic link too), it records the run's plan, refuses
// the parts of another job or a directory of parts without a plan, and
// --replace leaves no part of the old plan in it.
func TestShardRejectedDirectory(t *testing.T) {
	in := "../../fixtures/stores/demo.parquet"
	dir := t.TempDir()
	parts, rej := filepath.Join(dir, "parts"), filepath.Join(dir, "rej")
	run := func(out, rej string, extra ...string) (string, int) {
		args := append([]string{"run", "--advantage-fn", "grpo", "--arg", "std_threshold=0", "--in", in,
			"--out", out, "--rejected", rej, "--progress", "never"}, extra...)
		_, stderr, code := runCLI(t, args...)
		return stderr, code
	}
	elsewhere := filepath.Join(dir, "elsewhere")
	if err := os.Mkdir(elsewhere, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(elsewhere, link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, out, rej, want string
	}{
		{"--rejected inside --out", parts, filepath.Join(parts, "rej"), "--rejected lies inside the directory of parts of --out"},
		{"--out inside --rejected", filepath.Join(rej, "parts"), rej, "--out lies inside the directory of parts of --rejected"},
		{"--rejected inside --out through a link", link, filepath.Join(elsewhere, "rej"), "--rejected lies inside the directory of parts of --out"},
		{"--out inside --rejected through a link", filepath.Join(elsewhere, "parts"), link, "--out lies inside the directory of parts of --rejected"},
	} {
		if stderr, code := run(c.out, c.rej, "--shards", "2", "--shard", "0"); code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d, %q; want 2 and %q", c.name, code, stderr, c.want)
		}
		for _, d := range []string{parts, rej} {
			if _, err := os.Stat(d); !os.IsNotExist(err) {
				t.Fatalf("%s: a refused run made %s (%v)", c.name, d, err)
			}
		}
		if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
			t.Fatalf("%s: a refused run wrote into %s", c.name, elsewhere)
		}
	}
	for _, i := range []string{"0", "1"} {
		if stderr, code := run(parts, rej, "--shards", "2", "--shard", i); code != 0 {
			t.Fatalf("shard %s: %s", i, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(rej, "_plan.json")); err != nil {
		t.Fatalf("--rejected records no plan: %v", err)
	}
	// Another job into the same --rejected, its --out fresh: refused, and
	// the fresh --out it claimed first is gone again.
	fresh := filepath.Join(dir, "fresh")
	if stderr, code := run(fresh, rej, "--shards", "2", "--shard", "0", "--seed", "7"); code != 2 || !strings.Contains(stderr, "another plan") || !strings.Contains(stderr, "another --rejected") {
		t.Errorf("another job's --rejected: exit %d, %q", code, stderr)
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Errorf("a refused run left %s (%v)", fresh, err)
	}
	bare := filepath.Join(dir, "bare")
	if err := os.MkdirAll(bare, 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, in, filepath.Join(bare, "part-1.parquet"))
	if stderr, code := run(fresh, bare, "--shards", "2", "--shard", "0"); code != 2 || !strings.Contains(stderr, "part-1.parquet but no plan") {
		t.Errorf("--rejected holding a part without a plan: exit %d, %q", code, stderr)
	}
	// --replace: one shard of a 1-shard plan; the old plan's part-1 gone.
	if stderr, code := run(parts, rej, "--shards", "1", "--shard", "0", "--replace"); code != 0 {
		t.Fatalf("--replace: %s", stderr)
	}
	if _, err := os.Stat(filepath.Join(rej, "part-1.parquet")); !os.IsNotExist(err) {
		t.Errorf("--replace kept the old plan's rejected part-1.parquet (%v)", err)
	}
}
