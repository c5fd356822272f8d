package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/schema/store"
)

// runCLI runs rftpipe in-process with args and returns stdout, stderr and the
// exit code main would use.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runCLIContext(t, context.Background(), args...)
}

// runCLIContext is runCLI under ctx: cancelling it is the signal a running
// command stops on.
func runCLIContext(t *testing.T, ctx context.Context, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	app := newApp()
	app.Writer, app.ErrWriter = &out, &errb
	err := app.RunContext(ctx, interspersed(app, append([]string{"rftpipe"}, args...)))
	code = report(&errb, ctx, err)
	if strings.Contains(errb.String(), "goroutine ") || strings.Contains(errb.String(), "panic:") {
		t.Fatalf("panic trace on stderr:\n%s", errb.String())
	}
	return out.String(), errb.String(), code
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

func TestGenIsDeterministicAndInspectable(t *testing.T) {
	dir := t.TempDir()
	var sums [][32]byte
	for _, name := range []string{"a.parquet", "b.parquet"} {
		out := filepath.Join(dir, name)
		if _, stderr, code := runCLI(t, "gen", "--tasks", "50", "--runs", "4", "--resp-len", "8:32", "--kind", "multi", "--steps", "2", "--seed", "3", "--out", out); code != 0 {
			t.Fatalf("gen: exit %d: %s", code, stderr)
		}
		sums = append(sums, fileSum(t, out))
	}
	if sums[0] != sums[1] {
		t.Fatal("gen: same seed, different bytes")
	}
	stdout, stderr, code := runCLI(t, "inspect", filepath.Join(dir, "a.parquet"), "--format", "json")
	if code != 0 {
		t.Fatalf("inspect: exit %d: %s", code, stderr)
	}
	var ins struct {
		Rows  int64 `json:"rows"`
		Tasks int   `json:"tasks"`
		Runs  int   `json:"runs"`
		Steps int   `json:"steps"`
	}
	if err := json.Unmarshal([]byte(stdout), &ins); err != nil {
		t.Fatal(err)
	}
	if ins.Rows != 400 || ins.Tasks != 50 || ins.Runs != 200 || ins.Steps != 2 {
		t.Fatalf("inspect = %+v, want 400 rows, 50 tasks, 200 runs, 2 steps", ins)
	}
}

func TestGenBadFlags(t *testing.T) {
	out := filepath.Join(t.TempDir(), "x.parquet")
	for _, args := range [][]string{
		{"gen", "--resp-len", "9:3", "--out", out},
		{"gen", "--reward", "bernoulli:2", "--out", out},
		{"gen", "--kind", "weird", "--out", out},
		{"gen", "--tasks", "0", "--out", out},
		{"gen", "--out", filepath.Join(out, "nodir", "x.parquet")},
		{"gen", "--out", filepath.Join(t.TempDir(), "x.csv")},
		{"gen", "--bogus"},
	} {
		_, stderr, code := runCLI(t, args...)
		if code != exitBadInput {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, stderr)
		}
		if n := strings.Count(strings.TrimSpace(stderr), "\n"); n > 0 && !strings.Contains(stderr, "USAGE") {
			t.Errorf("%v: %d-line message: %s", args, n+1, stderr)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%v: left %s behind", args, out)
		}
	}
}

// TestBadFixtures runs convert over every hand-made bad store: exit 2, one
// line naming the file (and row/column where there is one), no output left,
// input untouched. (The invalid-reward stores convert: see
// TestConvertKeepsInvalidRewards.)
func TestBadFixtures(t *testing.T) {
	tests := []struct{ file, want string }{
		{"empty.parquet", "not a readable Parquet file"},
		{"garbage.parquet", "not a readable Parquet file"},
		{"truncated.parquet", "not a readable Parquet file"},
		{"flipped_footer.parquet", "not a readable Parquet file"},
		{"empty.jsonl", "empty store"},
		{"not_json.jsonl", "row 0: line 1 is not a JSON object"},
		{"wrong_type.jsonl", `row 0: column "reward": want a number`},
		{"ragged.jsonl", `row 1: column "action_mask": ragged row`},
		{"token_mismatch.jsonl", `row 0: column "tokens"`},
		{"nan_logprob.jsonl", `row 0: column "logprobs": log-prob NaN at token 1`},
		{"null_id.jsonl", `row 1: column "task": null id`},
	}
	dir := t.TempDir()
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			in := filepath.Join("../../fixtures/bad", tc.file)
			before := fileSum(t, in)
			out := filepath.Join(dir, "out.parquet")
			_, stderr, code := runCLI(t, "convert", in, out)
			if code != exitBadInput {
				t.Fatalf("exit %d, want 2: %s", code, stderr)
			}
			line := strings.TrimSpace(stderr)
			if strings.Contains(line, "\n") || !strings.Contains(line, in) || !strings.Contains(line, tc.want) {
				t.Errorf("message %q: want one line naming %s and saying %q", line, in, tc.want)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("left %v behind", ents)
			}
			if fileSum(t, in) != before {
				t.Error("input changed")
			}
		})
	}
}

// TestConvertKeepsInvalidRewards: a conversion copies a NaN reward as it
// is, with default flags, except into an SQLite experience table, which
// would store it as NULL: that is refused naming the row, nothing written.
func TestConvertKeepsInvalidRewards(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.parquet")
	if _, stderr, code := runCLI(t, "convert", "../../fixtures/bad/nan_reward.jsonl", out); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	stdout, _, _ := runCLI(t, "inspect", out, "--format", "json")
	if !strings.Contains(stdout, `"invalid": 1`) {
		t.Errorf("inspect does not count the NaN reward: %s", stdout)
	}
	url := "sqlite:///" + filepath.Join(dir, "b.db") + "?table=t"
	_, stderr, code := runCLI(t, "convert", out, url)
	if code != 2 || !strings.Contains(stderr, `row 1: column "reward": cannot write into experience table t: reward NaN`) {
		t.Errorf("NaN reward into SQLite: exit %d, want 2 naming row 1's reward:\n%s", code, stderr)
	}
	if stdout, _, code := runCLI(t, "inspect", url); code != 2 {
		t.Errorf("the refused write left a table (exit %d): %s", code, stdout)
	}
}

func TestInterspersedFlags(t *testing.T) {
	a, _, c1 := runCLI(t, "inspect", "--format", "json", "../../fixtures/stores/demo.parquet")
	b, _, c2 := runCLI(t, "inspect", "../../fixtures/stores/demo.parquet", "--format", "json")
	if c1 != 0 || c2 != 0 || a != b || !strings.Contains(a, `"rows": 384`) {
		t.Fatalf("flag order changes the result: %d %d\n%s\n%s", c1, c2, a, b)
	}
}

// TestStreamingCommandsLimitHeap: run, gen, convert, loss, ingest and compact set the heap's soft
// limit (unless GOMEMLIMIT does); the other commands leave it alone.
func TestStreamingCommandsLimitHeap(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	prev := debug.SetMemoryLimit(math.MaxInt64)
	defer debug.SetMemoryLimit(prev)
	for _, c := range newApp().Commands {
		debug.SetMemoryLimit(math.MaxInt64)
		if c.Before != nil {
			if err := c.Before(nil); err != nil {
				t.Fatal(err)
			}
		}
		want := int64(math.MaxInt64)
		switch c.Name {
		case "run", "gen", "convert", "loss", "ingest", "compact":
			want = store.HeapLimit
		}
		if got := debug.SetMemoryLimit(-1); got != want {
			t.Errorf("%s: heap limit %d, want %d", c.Name, got, want)
		}
	}
	t.Setenv("GOMEMLIMIT", "3GiB")
	debug.SetMemoryLimit(math.MaxInt64)
	for _, c := range newApp().Commands {
		if c.Name == "run" {
			c.Before(nil)
		}
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("with GOMEMLIMIT set, run changed the limit to %d", got)
	}
}
