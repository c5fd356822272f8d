package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v17/arrow/array"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/loss"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// advantageStore writes a small multi-turn store with GRPO advantages.
func advantageStore(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	raw, adv := filepath.Join(dir, "raw.parquet"), filepath.Join(dir, "adv.parquet")
	if _, stderr, code := runCLI(t, "gen", "--tasks", "6", "--runs", "4", "--resp-len", "4:20", "--kind", "multi", "--seed", "5", "--out", raw, "--progress", "never"); code != 0 {
		t.Fatalf("gen: %s", stderr)
	}
	if _, stderr, code := runCLI(t, "run", "--advantage-fn", "grpo", "--in", raw, "--out", adv, "--progress", "never"); code != 0 {
		t.Fatalf("run: %s", stderr)
	}
	return adv
}

func TestLossCommand(t *testing.T) {
	in := advantageStore(t)
	gradOut := filepath.Join(filepath.Dir(in), "grad.parquet")
	stdout, stderr, code := runCLI(t, "loss", "--fn", "ppo", "--arg", "clip_range=0.1", "--in", in,
		"--kl-loss-fn", "k2", "--col", "ref_log_prob=logprobs", "--grad-out", gradOut, "--format", "json")
	if code != 0 {
		t.Fatalf("loss: exit %d: %s", code, stderr)
	}
	var out lossOutput
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	// logprob defaults to the rollout logprobs: ratio 1, nothing clipped, KL 0.
	if out.Rows != 24 || out.Args["clip_range"] != 0.1 || *out.Metrics["actor/pg_clipfrac"] != 0 ||
		*out.Metrics["actor/kl_loss"] != 0 || *out.Metrics["actor/final_loss"] != *out.Loss {
		t.Errorf("output %+v", out)
	}

	// The gradient store has one row per input row, equal to the library's
	// gradient (float32) and zero where the mask is.
	b := wholeBatch(t, in)
	l, _ := loss.New(loss.Default(), "ppo", map[string]any{"clip_range": 0.1})
	want := make([]float64, b.Rows.Tokens())
	if _, err := l.Eval(b, want); err != nil {
		t.Fatal(err)
	}
	r, err := store.Open(gradOut)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got []float64
	rows := 0
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		rows += int(rec.NumRows())
		if rec.Schema().FieldIndices("task") == nil {
			t.Error("grad-out lacks the id columns")
		}
		lst := rec.Column(rec.Schema().FieldIndices(schema.GradLogprob)[0]).(*array.List)
		for _, v := range lst.ListValues().(*array.Float32).Float32Values() {
			got = append(got, float64(v))
		}
	}
	if rows != 24 || len(got) != len(want) {
		t.Fatalf("grad-out: %d rows, %d tokens; want 24, %d", rows, len(got), len(want))
	}
	mask := b.Col(tokens.ActionMask)
	nonzero := 0
	for i := range got {
		if math.Abs(got[i]-want[i]) > 1e-6*math.Abs(want[i]) || mask[i] == 0 && got[i] != 0 {
			t.Fatalf("grad[%d] = %v, want %v (mask %v)", i, got[i], want[i], mask[i])
		}
		if got[i] != 0 {
			nonzero++
		}
	}
	if nonzero == 0 {
		t.Error("all-zero gradient")
	}

	// Table output and the Q-05 override: gspo runs token-mean unless told.
	stdout, _, code = runCLI(t, "loss", "--fn", "gspo", "--in", in, "--format", "json")
	if code != 0 || !strings.Contains(stdout, `"loss_agg_mode": "token-mean"`) {
		t.Errorf("gspo default: exit %d: %s", code, stdout)
	}
	stdout, _, code = runCLI(t, "loss", "--fn", "gspo", "--arg", "respect_own_loss_agg_mode=true", "--in", in, "--format", "json")
	if code != 0 || !strings.Contains(stdout, `"loss_agg_mode": "seq-mean-token-mean"`) {
		t.Errorf("gspo respecting its mode: exit %d: %s", code, stdout)
	}
	stdout, _, code = runCLI(t, "loss", "--fn", "sft", "--in", in)
	if code != 0 || !strings.Contains(stdout, "actor/sft_loss") {
		t.Errorf("table: exit %d: %s", code, stdout)
	}
}

func TestLossCommandErrors(t *testing.T) {
	in := advantageStore(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown loss", []string{"--fn", "ppo2", "--in", in}, "unknown policy loss"},
		{"unknown arg", []string{"--fn", "ppo", "--arg", "clip=1", "--in", in}, "unknown argument clip"},
		{"bad value", []string{"--fn", "sft_phi", "--arg", "cutoff_prob=0", "--in", in}, "argument cutoff_prob: 0 is outside its valid range (0,1]"},
		{"missing column", []string{"--fn", "dpo", "--in", in}, "missing input ref_logprob"},
		{"mix needs expert_mask", []string{"--fn", "mix", "--in", in}, "missing input expert_mask"},
		{"bad --col", []string{"--fn", "ppo", "--in", in, "--col", "rewards=reward"}, "want CANONICAL=COLUMN"},
		{"absent --col column", []string{"--fn", "ppo", "--in", in, "--col", "logprob=nope"}, `column "nope": no such column`},
		{"list of ints", []string{"--fn", "ppo", "--in", in, "--col", "advantages=tokens"}, "want a list of float32, float64 or bool"},
		{"length mismatch", []string{"--fn", "ppo", "--in", in, "--col", "action_mask=tokens"}, "has"},
		{"no store", []string{"--fn", "ppo", "--in", filepath.Join(t.TempDir(), "none.parquet")}, "no such file"},
		{"entropy without column", []string{"--fn", "ppo", "--in", in, "--entropy-coef", "0.1"}, "missing input entropy"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := runCLI(t, append([]string{"loss"}, tc.args...)...)
			if code != exitBadInput || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr, tc.want)
			}
		})
	}
}

// TestColListsEveryInput: a --col naming no input is refused with the list
// of every input, and the help of --col gives the same list.
func TestColListsEveryInput(t *testing.T) {
	const every = "logprob, old_logprob, ref_logprob, advantages, action_mask, teacher_logprob, entropy, values, expert_mask, rollout_is_weights"
	_, stderr, code := runCLI(t, "loss", "--fn", "ppo", "--in", advantageStore(t), "--col", "nosuch=x")
	if want := `--col "nosuch=x": want CANONICAL=COLUMN with CANONICAL one of ` + every + "\n"; code != exitBadInput || !strings.HasSuffix(stderr, want) {
		t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr, want)
	}
	stdout, _, code := runCLI(t, "help", "loss")
	if want := "(" + every + "; verl names accepted)"; code != 0 || !strings.Contains(strings.Join(strings.Fields(stdout), " "), want) {
		t.Errorf("help loss: exit %d, want %q in %s", code, want, stdout)
	}
}

func TestConformanceCommand(t *testing.T) {
	stdout, stderr, code := runCLI(t, "conformance", "../../fixtures/conformance", "--kind", "policy_loss,kl,entropy")
	if code != 0 || stdout != "169 passed, 0 failed, 0 skipped\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	// Every case of every kind of the directory, the operator kind included.
	stdout, stderr, code = runCLI(t, "conformance", "../../fixtures/conformance")
	if want := fmt.Sprintf("%d passed, 0 failed, 0 skipped\n", fixtureCases(t)); code != 0 || stdout != want {
		t.Errorf("all kinds: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	// A tampered golden value fails: one line for the case, exit 1.
	b, err := os.ReadFile("../../fixtures/conformance/entropy.json")
	if err != nil {
		t.Fatal(err)
	}
	var f map[string]any
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	c0 := f["cases"].([]any)[1].(map[string]any)
	c0["expected"].(map[string]any)["loss"] = 42.0
	dir := t.TempDir()
	b, _ = json.Marshal(f)
	if err := os.WriteFile(filepath.Join(dir, "entropy.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, _, code = runCLI(t, "conformance", dir)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != exitFailure || len(lines) != 2 || !strings.Contains(lines[0], c0["name"].(string)+": loss: got") || lines[1] != "10 passed, 1 failed, 0 skipped" {
		t.Errorf("tampered: exit %d, stdout %q", code, stdout)
	}
	if _, _, code := runCLI(t, "conformance"); code != exitBadInput {
		t.Errorf("no DIR: exit %d", code)
	}
}

func TestBenchLossCommand(t *testing.T) {
	stdout, stderr, code := runCLI(t, "bench", "loss", "--fn", "ppo", "--shape", "8x64", "--runs", "3", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"fn", "shape", "device", "median_ms", "mtok_per_s", "gb_per_s", "copy_gb_per_s", "copy_fraction"} {
		if _, ok := r[k].(float64); !ok && k != "fn" && k != "shape" && k != "device" {
			t.Errorf("JSON lacks the number %q: %s", k, stdout)
		}
	}
	if r["fn"] != "ppo" || r["shape"] != "8x64" || r["device"] != "cpu" || !(r["mtok_per_s"].(float64) > 0) {
		t.Errorf("bench JSON %s", stdout)
	}
	// PPO moves 40 bytes a token (logprob, old_logprob, action_mask,
	// advantages read, the gradient written): its GB/s is its Mtok/s × 40
	// / 1000, and the fraction that over the copy bandwidth.
	if gb, want := r["gb_per_s"].(float64), r["mtok_per_s"].(float64)*40/1000; math.Abs(gb-want) > 1e-9*want {
		t.Errorf("gb_per_s %v, want %v (40 bytes a token)", gb, want)
	}
	if f, want := r["copy_fraction"].(float64), r["gb_per_s"].(float64)/r["copy_gb_per_s"].(float64); !(r["copy_gb_per_s"].(float64) > 0) || math.Abs(f-want) > 1e-9*want {
		t.Errorf("copy_fraction %v, want %v", f, want)
	}
	for _, args := range [][]string{
		{"--fn", "ppo", "--shape", "8by64"},
		{"--fn", "ppo", "--device", "tpu"},
		{"--fn", "nope"},
	} {
		if _, _, code := runCLI(t, append([]string{"bench", "loss"}, args...)...); code != exitBadInput {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

// wholeBatch reads a store's rollout log-probs (as the current, old and
// reference log-probs), advantages and mask into one token batch.
func wholeBatch(t *testing.T, path string) *tokens.Batch {
	t.Helper()
	flat, lens := readLists(t, path, schema.Logprobs, schema.Advantages, schema.ActionMask)
	b := tokens.New(agg.NewRows(lens))
	for name, col := range map[string]string{tokens.LogProb: schema.Logprobs, tokens.OldLogProb: schema.Logprobs,
		tokens.RefLogProb: schema.Logprobs, tokens.Advantages: schema.Advantages, tokens.ActionMask: schema.ActionMask} {
		if err := b.Set(name, flat[col]); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// TestLossRefusesBadArguments: NaN or infinite clip ranges are usage
// errors, not NaN results (a negative one is torch.clamp's, and runs).
func TestLossRefusesBadArguments(t *testing.T) {
	for _, arg := range []string{"clip_range=nan", "clip_range_low=inf", "clip_range_high=inf"} {
		_, stderr, code := runCLI(t, "loss", "--fn", "ppo", "--arg", arg, "--in", "../../fixtures/stores/full.parquet")
		if code != 2 || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("--arg %s: exit %d, %q; want 2 and one line", arg, code, stderr)
		}
	}
}

// TestLossJSONNonFinite: a value JSON cannot hold is written as null.
func TestLossJSONNonFinite(t *testing.T) {
	b, err := json.Marshal(lossOutput{Loss: jsonFloat(math.NaN()), Metrics: jsonMetrics(agg.Metrics{"a": math.Inf(-1), "b": 1})})
	if err != nil {
		t.Fatal(err)
	}
	if want := `"loss":null,"metrics":{"a":null,"b":1}`; !strings.Contains(string(b), want) {
		t.Errorf("%s lacks %s", b, want)
	}
}

// TestLossSeed: clip_cov's random choice among its candidates is drawn
// from --seed (--arg seed=N alike): the same seed the same output, another
// seed other tokens; a loss that draws nothing refuses --seed, and a loss
// without device kernels refuses --device cuda.
func TestLossSeed(t *testing.T) {
	in := advantageStore(t)
	run := func(extra ...string) lossOutput {
		t.Helper()
		a := append([]string{"loss", "--fn", "clip_cov", "--arg", "clip_cov_ratio=0.1", "--arg", "clip_cov_lb=-100",
			"--arg", "clip_cov_ub=100", "--in", in, "--format", "json"}, extra...)
		stdout, stderr, code := runCLI(t, a...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", a, code, stderr)
		}
		var out lossOutput
		if err := json.Unmarshal([]byte(stdout), &out); err != nil {
			t.Fatalf("%v: %s", err, stdout)
		}
		return out
	}
	a, again, b, arg := run("--seed", "3"), run("--seed", "3"), run("--seed", "4"), run("--arg", "seed=3")
	if *a.Loss != *again.Loss || *a.Loss != *arg.Loss || a.Args["seed"] != 3.0 {
		t.Errorf("seed 3: losses %v, %v, --arg seed=3: %v; args %v", *a.Loss, *again.Loss, *arg.Loss, a.Args)
	}
	if *a.Loss == *b.Loss {
		t.Errorf("seeds 3 and 4: the same loss %v", *a.Loss)
	}
	if f := *a.Metrics["actor/pg_clipfrac"]; !(f > 0.05 && f <= 0.1) {
		t.Errorf("pg_clipfrac %v: want about clip_cov_ratio 0.1", f)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"loss", "--fn", "ppo", "--seed", "1", "--in", in}, "policy loss ppo draws nothing at random"},
		{[]string{"loss", "--fn", "dppo_tv", "--device", "cuda", "--in", in}, "policy loss dppo_tv has no device kernels"},
	} {
		if _, stderr, code := runCLI(t, tc.args...); code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %s; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// fixtureCases counts the cases of every conformance file in the fixtures.
func fixtureCases(t *testing.T) int {
	t.Helper()
	files, err := filepath.Glob("../../fixtures/conformance/*.json")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v struct{ Cases []json.RawMessage }
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		n += len(v.Cases)
	}
	return n
}
