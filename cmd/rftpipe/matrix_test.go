package main

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v17/parquet/file"
)

// matrixCmds are the commands of the bad-input matrix; each builds its
// arguments from the input store and an output path in a fresh directory.
var matrixCmds = []struct {
	name string
	args func(in, out string) []string
}{
	{"run", func(in, out string) []string {
		return []string{"run", "--advantage-fn", "grpo", "--in", in, "--out", out, "--progress", "never"}
	}},
	{"loss", func(in, out string) []string { return []string{"loss", "--fn", "ppo", "--in", in} }},
	{"sql", func(in, out string) []string {
		return []string{"sql", "--store", in, "SELECT count(*) FROM experiences"}
	}},
	{"convert", func(in, out string) []string { return []string{"convert", in, out, "--progress", "never"} }},
	{"inspect", func(in, out string) []string { return []string{"inspect", in} }},
}

// Exit codes per command, in matrixCmds order: run, loss, sql, convert, inspect.
var (
	allBad = [5]int{2, 2, 2, 2, 2}
	// A readable store with a bad row: the pipeline commands and inspect
	// (which validates as it reads) refuse it; sql reads it as DuckDB does.
	// The bad fixtures carry no advantages, so loss refuses them for that
	// first.
	rowBad = [5]int{2, 2, 0, 2, 2}
	// A store with an invalid reward: run and loss refuse it; convert
	// copies it as it is and inspect counts it.
	rewardBad = [5]int{2, 2, 0, 0, 0}
)

// TestBadInputMatrix runs every matrix command over every bad input. Each
// cell: the expected exit code, no panic trace (runCLI), a one-line message
// naming the input on failure, no output left behind, the input unchanged.
func TestBadInputMatrix(t *testing.T) {
	tmp := t.TempDir()
	demo, err := os.ReadFile("../../fixtures/stores/demo.parquet")
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	flipped := append([]byte(nil), demo...)
	for _, off := range []int{len(flipped) - 9, len(flipped) - 40, len(flipped) / 2} {
		flipped[off] ^= 0xff
	}
	bad := func(f string) string { return filepath.Join("../../fixtures/bad", f) }
	// Footers that claim 5e9 rows: the file's count alone, or its first row
	// group's too, over the data of demo.parquet.
	claim := func(name string, rowGroupToo bool) string {
		pf, err := file.NewParquetReader(bytes.NewReader(demo))
		if err != nil {
			t.Fatal(err)
		}
		md := pf.MetaData()
		if rowGroupToo {
			md.RowGroups[0].NumRows += 5e9 - md.NumRows
		}
		md.NumRows = 5e9
		footer, err := md.Serialize(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		data := demo[:len(demo)-8-int(binary.LittleEndian.Uint32(demo[len(demo)-8:]))]
		b := append(append(slices.Clone(data), footer...), binary.LittleEndian.AppendUint32(nil, uint32(len(footer)))...)
		return write(name, append(b, "PAR1"...))
	}
	// Directory stores whose second file differs in its columns: every
	// command names both files and the column (never DuckDB's binder).
	mixedDir := func(name, query string) string {
		dir := filepath.Join(tmp, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		write(filepath.Join(name, "a.parquet"), demo)
		if _, stderr, code := runCLI(t, "sql", "--store", "../../fixtures/stores/demo.parquet", query, "--out", filepath.Join(dir, "b.parquet")); code != 0 {
			t.Fatalf("%s: %s", name, stderr)
		}
		return dir
	}
	inputs := []struct {
		name, path string
		codes      [5]int
		want       string // in every failure message, besides the path
	}{
		{"missing", filepath.Join(tmp, "missing.parquet"), allBad, "no such file"},
		{"empty.jsonl", bad("empty.jsonl"), allBad, "empty store"},
		{"empty.parquet", bad("empty.parquet"), allBad, ""},
		{"garbage.parquet", bad("garbage.parquet"), allBad, ""},
		{"truncated.parquet", bad("truncated.parquet"), allBad, ""},
		{"flipped_footer.parquet", bad("flipped_footer.parquet"), allBad, ""},
		{"cut_8", write("cut_8.parquet", demo[:8]), allBad, ""},
		{"cut_half", write("cut_half.parquet", demo[:len(demo)/2]), allBad, ""},
		{"cut_tail", write("cut_tail.parquet", demo[:len(demo)-4]), allBad, ""},
		{"flipped_bytes", write("flipped.parquet", flipped), allBad, ""},
		{"claims_5e9_rows", claim("claims_5e9_rows.parquet", false), allBad, "footer promises 5000000000 rows but its row groups hold 384"},
		{"row_group_claims_5e9_rows", claim("rg_claims_5e9_rows.parquet", true), allBad, "row group 0: footer gives 4999999"},
		{"not_json.jsonl", bad("not_json.jsonl"), [5]int{2, 2, 2, 2, 2}, "row 0"},
		{"wrong_type.jsonl", bad("wrong_type.jsonl"), allBad, ""},
		{"ragged.jsonl", bad("ragged.jsonl"), rowBad, ""},
		{"token_mismatch.jsonl", bad("token_mismatch.jsonl"), rowBad, ""},
		{"nan_reward.jsonl", bad("nan_reward.jsonl"), rewardBad, ""},
		{"inf_reward.jsonl", bad("inf_reward.jsonl"), rewardBad, ""},
		{"nan_logprob.jsonl", bad("nan_logprob.jsonl"), rowBad, ""},
		{"null_id.jsonl", bad("null_id.jsonl"), rowBad, ""},
		{"bad_utf8.jsonl", bad("bad_utf8.jsonl"), allBad, "invalid UTF-8"},
		// sql reads it as DuckDB does (which renames the second reward).
		{"dup_reward.parquet", bad("dup_reward.parquet"), [5]int{2, 2, 0, 2, 2}, `column "reward": duplicated column`},
		// convert copies a store without rewards as it is (no column is
		// required of a conversion); inspect and sql summarise it.
		{"missing_reward.jsonl", bad("missing_reward.jsonl"), [5]int{2, 2, 0, 0, 0}, ""},
		{"dir_extra_column", mixedDir("extra", "SELECT *, 1 AS extra FROM experiences"), allBad,
			`b.parquet: column "extra": schema differs from ` + filepath.Join(tmp, "extra", "a.parquet") + ": the column is only in this file"},
		{"dir_missing_column", mixedDir("fewer", "SELECT * EXCLUDE (reward) FROM experiences"), allBad,
			`b.parquet: column "reward": schema differs from ` + filepath.Join(tmp, "fewer", "a.parquet") + ": the column is missing in this file"},
		{"dir_reordered", mixedDir("reordered", "SELECT reward, * EXCLUDE (reward) FROM experiences"), allBad,
			`b.parquet: column "reward": schema differs from`},
	}
	for _, in := range inputs {
		for i, cmd := range matrixCmds {
			t.Run(in.name+"/"+cmd.name, func(t *testing.T) {
				var before [32]byte
				if in.name != "missing" && !strings.HasPrefix(in.name, "dir_") {
					before = fileSum(t, in.path)
				}
				outDir := t.TempDir()
				_, stderr, code := runCLI(t, cmd.args(in.path, filepath.Join(outDir, "out.parquet"))...)
				if code != in.codes[i] {
					t.Fatalf("exit %d, want %d: %s", code, in.codes[i], stderr)
				}
				if code != 0 {
					checkOneLine(t, stderr, filepath.Base(in.path), in.want)
				}
				ents, _ := os.ReadDir(outDir)
				if code == 0 && cmd.name == "convert" {
					if len(ents) != 1 || ents[0].Name() != "out.parquet" {
						t.Errorf("want only out.parquet, got %v", ents)
					}
				} else if len(ents) != 0 {
					t.Errorf("left %v behind", ents)
				}
				if in.name != "missing" && !strings.HasPrefix(in.name, "dir_") && fileSum(t, in.path) != before {
					t.Error("input changed")
				}
			})
		}
	}
}

// checkOneLine asserts stderr is one line mentioning each of wants.
func checkOneLine(t *testing.T, stderr string, wants ...string) {
	t.Helper()
	line := strings.TrimSpace(stderr)
	if line == "" || strings.Contains(line, "\n") {
		t.Errorf("want a one-line message, got %q", stderr)
	}
	for _, w := range wants {
		if !strings.Contains(line, w) {
			t.Errorf("message %q does not mention %q", line, w)
		}
	}
}

// TestBadArgsMatrix covers the per-command cases: unknown fn / argument, bad
// argument value, output over the input, missing output directory, and the
// degenerate stores whose result the spec defines (a single experience,
// every group filtered, all-masked rows, duplicate uids).
func TestBadArgsMatrix(t *testing.T) {
	tmp := t.TempDir()
	demo := filepath.Join(tmp, "demo.parquet")
	b, err := os.ReadFile("../../fixtures/stores/demo.parquet")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(demo, b, 0o644); err != nil {
		t.Fatal(err)
	}
	buffer := filepath.Join(tmp, "experience.db")
	if b, err = os.ReadFile("../../fixtures/trinity/v0.6/experience.db"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(buffer, b, 0o644); err != nil {
		t.Fatal(err)
	}
	nodir := filepath.Join(tmp, "nodir", "out.parquet")
	nullReward := filepath.Join(tmp, "null_reward.jsonl")
	if err := os.WriteFile(nullReward, []byte(`{"eid":{"batch":0,"task":0,"run":0},"reward":1.0,"tokens":[1]}
{"eid":{"batch":0,"task":0,"run":1},"reward":null,"tokens":[1]}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(tmp, "job.yaml")
	if err := os.WriteFile(cfg, []byte("algorithm:\n  algorithm_type: grpo\n  bogus_key: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const out = "OUT" // replaced by a path in the case's fresh directory
	tests := []struct {
		name    string
		args    []string
		code    int
		want    []string // in stderr
		keepOut bool     // exit 0 and OUT must exist
		multi   bool     // a SQL error: DuckDB's message with its caret, by design
	}{
		{"run/unknown fn", []string{"run", "--advantage-fn", "nope", "--in", demo, "--out", out}, 2, []string{`unknown advantage fn "nope"`}, false, false},
		{"run/unknown add strategy", []string{"run", "--add-strategy", "nosuch", "--in", demo, "--out", out}, 2, []string{`unknown add strategy "nosuch" (valid: correct_bias, `}, false, false},
		{"run/unknown operator", []string{"run", "--advantage-fn", "grpo", "--operator", "nosuch", "--in", demo, "--out", out}, 2, []string{`unknown experience operator "nosuch" (valid: `}, false, false},
		{"run/unknown arg", []string{"run", "--advantage-fn", "grpo", "--arg", "bogus=1", "--in", demo, "--out", out}, 2, []string{"unknown argument bogus"}, false, false},
		{"run/bad arg value", []string{"run", "--advantage-fn", "grpo", "--arg", "epsilon=abc", "--in", demo, "--out", out}, 2, []string{"epsilon", `"abc"`}, false, false},
		{"run/arg without =", []string{"run", "--advantage-fn", "grpo", "--arg", "epsilon", "--in", demo, "--out", out}, 2, []string{"epsilon"}, false, false},
		{"run/out is in", []string{"run", "--advantage-fn", "grpo", "--in", demo, "--out", demo}, 2, []string{demo, "overwrite the input"}, false, false},
		{"run/unknown config key", []string{"run", "--config", cfg, "--in", demo, "--out", out}, 2, []string{cfg, "line 3", "bogus_key: unknown key"}, false, false},
		{"run/every group filtered", []string{"run", "--advantage-fn", "grpo", "--arg", "std_threshold=100", "--in", demo, "--out", out}, 0, []string{"-> 0 written (384 filtered", "every experience was filtered out"}, true, false},
		{"run/single experience", []string{"run", "--advantage-fn", "grpo", "--in", "../../fixtures/bad/single.jsonl", "--out", out}, 0, []string{"1 experiences in 1 groups -> 1 written"}, true, false},
		{"run/all masked", []string{"run", "--advantage-fn", "grpo", "--in", "../../fixtures/bad/all_masked.jsonl", "--out", out}, 0, []string{"2 experiences in 1 groups -> 2 written"}, true, false},
		{"run/duplicate uids", []string{"run", "--advantage-fn", "grpo", "--in", "../../fixtures/bad/dup_uid.jsonl", "--out", out}, 0, []string{"2 experiences in 1 groups -> 2 written"}, true, false},
		{"ingest/bad catalog URL", []string{"ingest", demo, out, "--experiment", "a", "--catalog", "mysql://u:secret@h/db"}, 2, []string{"want sqlite:PATH or postgres://", "mysql://u:xxxxx@h/db"}, false, false},
		{"ingest/catalog is the source", []string{"ingest", "sqlite:///" + buffer + "?table=experience_buffer", out, "--experiment", "a", "--catalog", "sqlite:" + filepath.Dir(buffer) + "/./" + filepath.Base(buffer)}, 2, []string{"is the source's own database"}, false, false},
		{"loss/unknown fn", []string{"loss", "--fn", "nope", "--in", demo}, 2, []string{`unknown policy loss "nope"`}, false, false},
		{"loss/unknown KL fn", []string{"loss", "--fn", "ppo", "--kl-loss-fn", "nosuch", "--in", demo}, 2, []string{`unknown KL function "nosuch" (valid: `}, false, false},
		{"loss/unknown entropy fn", []string{"loss", "--fn", "ppo", "--entropy-loss-fn", "nosuch", "--in", demo}, 2, []string{`unknown entropy loss function "nosuch" (valid: `}, false, false},
		{"loss/unknown arg", []string{"loss", "--fn", "ppo", "--arg", "bogus=1", "--in", demo}, 2, []string{"unknown argument bogus"}, false, false},
		{"loss/bad arg value", []string{"loss", "--fn", "ppo", "--arg", "clip_range=abc", "--in", demo}, 2, []string{"clip_range", `"abc"`}, false, false},
		{"loss/grad-out is in", []string{"loss", "--fn", "sft", "--in", demo, "--grad-out", demo}, 2, []string{demo}, false, false},
		{"loss/no grad-out dir", []string{"loss", "--fn", "sft", "--in", demo, "--grad-out", nodir}, 2, []string{nodir}, false, false},
		{"sql/out is store", []string{"sql", "--store", demo, "SELECT 1", "--out", demo}, 2, []string{demo}, false, false},
		{"sql/no out dir", []string{"sql", "--store", demo, "SELECT 1", "--out", nodir}, 2, []string{nodir, "does not exist"}, false, false},
		{"sql/bad query", []string{"sql", "--store", demo, "SELEC nonsense"}, 2, []string{"Parser Error", "^"}, false, true},
		{"convert/out is in", []string{"convert", demo, demo}, 2, []string{demo, "overwrite the input"}, false, false},
		{"convert/no out dir", []string{"convert", demo, nodir}, 2, []string{nodir, "does not exist"}, false, false},
		{"convert/bad codec", []string{"convert", demo, out, "--codec", "lzma"}, 2, []string{"lzma"}, false, false},
		{"convert/null reward kept", []string{"convert", nullReward, out}, 0, []string{"2 experiences"}, true, false},
		{"convert/no on-invalid-reward", []string{"convert", nullReward, out, "--on-invalid-reward", "keep"}, 2, []string{"on-invalid-reward"}, false, false},
		{"convert/single", []string{"convert", "../../fixtures/bad/single.jsonl", out}, 0, []string{"1 experiences"}, true, false},
		{"inspect/bad format", []string{"inspect", demo, "--format", "xml"}, 2, []string{`--format "xml"`}, false, false},
		{"inspect/two stores", []string{"inspect", demo, demo}, 2, nil, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before, bufferBefore := fileSum(t, demo), fileSum(t, buffer)
			dir := t.TempDir()
			outPath := filepath.Join(dir, "out.parquet")
			args := append([]string(nil), tc.args...)
			for i, a := range args {
				if a == out {
					args[i] = outPath
				}
			}
			_, stderr, code := runCLI(t, args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d: %s", code, tc.code, stderr)
			}
			if code != 0 && !tc.multi {
				checkOneLine(t, stderr, tc.want...)
			} else {
				for _, w := range tc.want {
					if !strings.Contains(stderr, w) {
						t.Errorf("stderr %q does not mention %q", stderr, w)
					}
				}
			}
			ents, _ := os.ReadDir(dir)
			if tc.keepOut {
				if _, err := os.Stat(outPath); err != nil || len(ents) != 1 {
					t.Errorf("want only %s, got %v (%v)", outPath, ents, err)
				}
			} else if len(ents) != 0 {
				t.Errorf("left %v behind", ents)
			}
			if _, err := os.Stat(filepath.Dir(nodir)); err == nil {
				t.Error("created the missing output directory")
			}
			if fileSum(t, demo) != before || fileSum(t, buffer) != bufferBefore {
				t.Error("input changed")
			}
		})
	}
}

// TestDamagedStoreThroughDuckDB: a store whose footer is intact but whose
// data pages are cut makes DuckDB fail in words of its own ("don't know
// what type", a Thrift exception); run, sql and report then exit 2 with one
// line naming the file and the damaged row group, as the store reader finds
// it.
func TestDamagedStoreThroughDuckDB(t *testing.T) {
	dir := t.TempDir()
	whole, cut := filepath.Join(dir, "whole.parquet"), filepath.Join(dir, "cut.parquet")
	if _, stderr, code := runCLI(t, "gen", "--tasks", "5000", "--runs", "8", "--resp-len", "16", "--prompt-len", "4", "--seed", "1", "--out", whole, "--progress", "never"); code != 0 {
		t.Fatalf("gen: %s", stderr)
	}
	b, err := os.ReadFile(whole)
	if err != nil {
		t.Fatal(err)
	}
	n := int(binary.LittleEndian.Uint32(b[len(b)-8:]))
	data, footer := b[:len(b)-8-n], b[len(b)-8-n:]
	if err := os.WriteFile(cut, append(data[:len(data)/2:len(data)/2], footer...), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"run", "--advantage-fn", "grpo", "--in", cut, "--out", filepath.Join(dir, "out.parquet"), "--progress", "never"},
		{"sql", "SELECT count(*), sum(reward) FROM experiences", "--store", cut},
		{"report", "--in", cut, "--out", filepath.Join(dir, "r.html")},
	} {
		_, stderr, code := runCLI(t, args...)
		if code != 2 {
			t.Fatalf("%s: exit %d, want 2: %s", args[0], code, stderr)
		}
		checkOneLine(t, stderr, "cut.parquet", "row group")
	}
}
