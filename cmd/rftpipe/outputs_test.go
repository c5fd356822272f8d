package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunRoutesAgree: `run --advantage-fn grpo` and `run --algorithm grpo`
// go through the one job builder: both make a missing output directory and
// write byte-identical stores (and the same metrics keys).
func TestRunRoutesAgree(t *testing.T) {
	dir := t.TempDir()
	in := "../../fixtures/stores/demo.parquet"
	var outs [2][]byte
	for i, route := range [][]string{{"--advantage-fn", "grpo"}, {"--algorithm", "grpo"}} {
		out := filepath.Join(dir, "new"+route[0][2:], "sub", "x.parquet")
		metrics := filepath.Join(dir, route[0][2:]+".json")
		args := append([]string{"run", "--in", in, "--out", out, "--seed", "7", "--metrics", metrics}, route...)
		if _, stderr, code := runCLI(t, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", route, code, stderr)
		}
		var err error
		if outs[i], err = os.ReadFile(out); err != nil {
			t.Fatalf("%v: %v", route, err)
		}
	}
	if !bytes.Equal(outs[0], outs[1]) {
		t.Errorf("--advantage-fn grpo and --algorithm grpo wrote different stores (%d and %d bytes)", len(outs[0]), len(outs[1]))
	}
}

// TestOutputsNeverOnInputs: every file a command writes is checked against
// every file it reads and against each other before any work, whatever the
// command (store.CheckOutputs): the command exits 2 naming the clash, and
// every input stays byte-identical, even when the job itself would fail.
func TestOutputsNeverOnInputs(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.parquet")
	copyFile(t, "../../fixtures/stores/demo.parquet", in)
	full := filepath.Join(dir, "full.parquet")
	copyFile(t, "../../fixtures/stores/full.parquet", full)
	pdir := filepath.Join(dir, "pdir")
	if err := os.Mkdir(pdir, 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, "../../fixtures/stores/demo.parquet", filepath.Join(pdir, "part-0.parquet"))
	cfg := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(cfg, []byte("algorithm: {algorithm_type: grpo}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.parquet")
	if err := os.Symlink(in, link); err != nil {
		t.Fatal(err)
	}
	linkdir := filepath.Join(dir, "linkdir") // pdir through a symbolic link
	if err := os.Symlink(pdir, linkdir); err != nil {
		t.Fatal(err)
	}
	sharded := filepath.Join(dir, "sharded")
	if _, stderr, code := runCLI(t, "run", "--advantage-fn", "grpo", "--in", in, "--out", sharded, "--shards", "1", "--shard", "0"); code != 0 {
		t.Fatalf("sharded run: %s", stderr)
	}
	part := filepath.Join(sharded, "_metrics", "part-0.json")
	out := filepath.Join(dir, "o.parquet")
	run := []string{"run", "--advantage-fn", "grpo", "--in", in}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"run --prom in", append(run, "--out", out, "--prom", in), "--prom would overwrite the input"},
		{"run --metrics in via link", append(run, "--out", out, "--metrics", link), "--metrics would overwrite the input"},
		{"run --metrics = --out", append(run, "--out", out, "--metrics", out), "--metrics is also the file of"},
		{"run --prom = --metrics", append(run, "--out", out, "--metrics", filepath.Join(dir, "m"), "--prom", filepath.Join(dir, ".", "m")), "--prom is also the file of"},
		{"run --out in, spelled otherwise", append(run, "--out", filepath.Join(dir, "pdir", "..", "in.parquet")), "would overwrite the input"},
		{"run --metrics inside a directory store", []string{"run", "--advantage-fn", "grpo", "--in", pdir, "--out", out, "--metrics", filepath.Join(pdir, "m.json")}, "--metrics lies inside the input store"},
		{"run --metrics onto the job file", []string{"run", "--config", cfg, "--in", in, "--out", out, "--metrics", cfg}, "--metrics would overwrite the input"},
		{"run --algorithm --prom in", []string{"run", "--algorithm", "grpo", "--in", in, "--out", out, "--prom", in}, "--prom would overwrite the input"},
		{"loss --metrics in (the loss fails)", []string{"loss", "--fn", "ppo", "--in", in, "--metrics", in}, "--metrics would overwrite the input"},
		{"loss --prom in", []string{"loss", "--fn", "ppo", "--in", full, "--prom", full}, "--prom would overwrite the input"},
		{"loss --grad-out = --metrics", []string{"loss", "--fn", "ppo", "--in", full, "--grad-out", out, "--metrics", out}, "--metrics is also the file of"},
		{"convert into a directory store", []string{"convert", pdir, filepath.Join(pdir, "part-9.parquet")}, "lies inside the input store"},
		{"convert into a glob store", []string{"convert", filepath.Join(pdir, "*.parquet"), filepath.Join(pdir, "x.parquet")}, "matches the input store"},
		{"run from a glob through a linked directory, --out into it", []string{"run", "--advantage-fn", "grpo", "--in", filepath.Join(linkdir, "*.parquet"), "--out", filepath.Join(pdir, "x.parquet")}, "--out matches the input store"},
		{"run from a glob, --rejected into it through a link", []string{"run", "--advantage-fn", "grpo", "--arg", "std_threshold=0", "--in", filepath.Join(pdir, "*.parquet"), "--out", out, "--rejected", filepath.Join(linkdir, "r.parquet")}, "--rejected matches the input store"},
		{"convert from a glob through a linked directory, onto a file of it", []string{"convert", filepath.Join(linkdir, "*.parquet"), filepath.Join(pdir, "part-0.parquet")}, "would overwrite the input"},
		{"sql --out inside --store", []string{"sql", "--store", pdir, "--out", filepath.Join(pdir, "y.parquet"), "SELECT 1"}, "--out lies inside the input store"},
		{"sql --out onto --file", []string{"sql", "--store", in, "--file", cfg, "--out", cfg}, "--out would overwrite the input"},
		{"report --out in", []string{"report", in, "--out", link}, "--out would overwrite the input"},
		{"merge-metrics --metrics onto a part", []string{"merge-metrics", sharded, "--metrics", part}, "--metrics would overwrite the input"},
		{"merge-metrics --prom onto a new part", []string{"merge-metrics", sharded, "--prom", filepath.Join(sharded, "_metrics", "part-9.json")}, "--prom matches the input store"},
		{"run --metrics onto the buffer written", append(run, "--out", "sqlite:///"+filepath.Join(dir, "b.db")+"?table=t", "--metrics", filepath.Join(dir, "b.db")), "--metrics is also the file of --out"},
		{"run --rejected buffer in the file of --out", append(run, "--arg", "std_threshold=0", "--out", filepath.Join(dir, "b2.db"), "--rejected", "sqlite:///"+filepath.Join(dir, "b2.db")+"?table=t"), "--rejected is in the file of --out"},
		{"convert into a buffer in the input file", []string{"convert", in, "sqlite:///" + in + "?table=t"}, "would overwrite the input"},
		{"merge-metrics --prom = --metrics", []string{"merge-metrics", sharded, "--metrics", filepath.Join(dir, "mm"), "--prom", filepath.Join(dir, "mm")}, "--prom is also the file of"},
	}
	inputs := []string{in, full, cfg, filepath.Join(pdir, "part-0.parquet"), part}
	before := map[string][]byte{}
	for _, f := range inputs {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		before[f] = b
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, stderr, code := runCLI(t, c.args...)
			if code != 2 || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr, c.want)
			}
			for _, f := range inputs {
				if b, err := os.ReadFile(f); err != nil || !bytes.Equal(b, before[f]) {
					t.Fatalf("%s changed (%v)", f, err)
				}
			}
			ents, _ := os.ReadDir(pdir)
			if len(ents) != 1 {
				t.Errorf("the directory store now holds %d files", len(ents))
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("the job ran: %s written", out)
			}
		})
	}
}

// TestFailedRunsLeaveNothing: a run, sharded run or conversion that fails
// leaves no directory it made and no database file behind; directories
// that were there stay.
func TestFailedRunsLeaveNothing(t *testing.T) {
	bad := "../../fixtures/bad/nan_reward.jsonl"
	rowBad := "../../fixtures/bad/token_mismatch.jsonl"
	for _, c := range []struct {
		name string
		args func(dir string) []string
		keep []string // entries of dir that must stay
	}{
		{"run into new directories", func(d string) []string {
			return []string{"run", "--advantage-fn", "grpo", "--in", bad, "--out", filepath.Join(d, "a", "b", "o.parquet")}
		}, nil},
		{"run into a new directory of an existing one", func(d string) []string {
			os.Mkdir(filepath.Join(d, "k"), 0o755)
			return []string{"run", "--advantage-fn", "grpo", "--in", rowBad, "--out", filepath.Join(d, "k", "b", "o.parquet")}
		}, []string{"k"}},
		{"sharded run", func(d string) []string {
			return []string{"run", "--advantage-fn", "grpo", "--in", "../../fixtures/bad/garbage.parquet", "--out", filepath.Join(d, "parts"), "--shards", "2", "--shard", "1"}
		}, nil},
		{"run into SQLite", func(d string) []string {
			return []string{"run", "--advantage-fn", "grpo", "--in", rowBad, "--out", "sqlite:///" + filepath.Join(d, "o.db") + "?table=t"}
		}, nil},
		{"convert into SQLite", func(d string) []string {
			return []string{"convert", bad, "sqlite:///" + filepath.Join(d, "c.db") + "?table=t"}
		}, nil},
		{"convert into a new directory", func(d string) []string {
			return []string{"convert", bad, filepath.Join(d, "n", "c.parquet")}
		}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, err := filepath.Abs(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			args := c.args(dir)
			if _, stderr, code := runCLI(t, append(args, "--progress", "never")...); code == 0 {
				t.Fatalf("%v ran: %s", args, stderr)
			}
			var left []string
			filepath.WalkDir(dir, func(p string, _ os.DirEntry, _ error) error {
				if rel, _ := filepath.Rel(dir, p); rel != "." {
					left = append(left, rel)
				}
				return nil
			})
			if strings.Join(left, ",") != strings.Join(c.keep, ",") {
				t.Errorf("left %v, want %v", left, c.keep)
			}
		})
	}
}
