package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestRangeMatrix: a numeric flag, fn argument or analysis variable outside
// its declared range, or a size past its bound, is refused before any work
// (exit 2, one line naming it), never a panic or an unbounded allocation;
// nothing is written.
func TestRangeMatrix(t *testing.T) {
	tmp := t.TempDir()
	demo := filepath.Join(tmp, "demo.parquet")
	b, err := os.ReadFile("../../fixtures/stores/demo.parquet")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(demo, b, 0o644); err != nil {
		t.Fatal(err)
	}
	const out = "OUT"
	run := func(a ...string) []string {
		return append([]string{"run", "--in", demo, "--out", out, "--progress", "never"}, a...)
	}
	loss := func(a ...string) []string { return append([]string{"loss", "--fn", "ppo", "--in", demo}, a...) }
	tests := []struct {
		name string
		args []string
		want string
	}{
		// class 7: fn arguments (Resolve) ...
		{"grpo epsilon=inf", run("--advantage-fn", "grpo", "--arg", "epsilon=inf"), "argument epsilon: +Inf is outside its valid range (-inf,inf)"},
		{"grpo std_threshold nan", run("--advantage-fn", "grpo", "--arg", "std_threshold=nan"), "argument std_threshold"},
		{"jsd temperature=0", run("--advantage-fn", "jsd", "--arg", "temperature=0"), "argument temperature: 0 is outside its valid range (-inf,0)∪(0,inf)"},
		{"gdpo num_generations=0", run("--advantage-fn", "gdpo", "--arg", "num_generations=0"), "argument num_generations: 0 is outside"},
		{"gdpo reward_weights=nan,inf", run("--advantage-fn", "gdpo", "--arg", "reward_weights=nan,inf"), "argument reward_weights: element 0: NaN is outside"},
		{"gdpo reward_weights=1,inf", run("--advantage-fn", "gdpo", "--arg", "reward_weights=1,inf"), "argument reward_weights: element 1: +Inf is outside"},
		{"math_dapo_reward penalty_factor inf", run("--operator", "math_dapo_reward", "--arg", "math_dapo_reward.penalty_factor=inf", "--advantage-fn", "grpo"), "argument penalty_factor: +Inf is outside"},
		{"math_dapo_reward max_response_length<=cache_length", run("--operator", "math_dapo_reward", "--arg", "math_dapo_reward.enable_overlong_penalty=true", "--arg", "math_dapo_reward.penalty_factor=1",
			"--arg", "math_dapo_reward.max_response_length=4", "--arg", "math_dapo_reward.cache_length=4", "--advantage-fn", "grpo"), "max_response_length must be greater than cache_length"},
		{"reward_std_filter operator threshold nan", run("--operator", "reward_std_filter", "--arg", "reward_std_filter.threshold=nan", "--advantage-fn", "grpo"), "argument threshold: NaN is not a value"},
		{"strategy epsilon", run("--add-strategy", "grpo", "--arg", "epsilon=-inf"), "argument epsilon"},
		{"loss opmd tau=-1", []string{"loss", "--fn", "opmd", "--in", demo, "--arg", "tau=-1"}, "argument tau: -1 is outside"},
		{"loss dp_size=0", loss("--arg", "clip_range=0.2", "--arg", "dp_size=0"), "argument dp_size"},
		// ... and command-line flags (flagRange).
		{"kl-coef nan", loss("--kl-coef", "nan"), "--kl-coef NaN is outside its valid range (-inf,inf)"},
		{"entropy-coef inf", loss("--entropy-coef", "inf"), "--entropy-coef +Inf is outside"},
		{"step<1", loss("--step", "-3"), "--step -3 is outside its valid range [1,inf)"},
		{"gen bernoulli nan", []string{"gen", "--reward", "bernoulli:nan", "--out", out}, "bernoulli:nan"},
		{"gen bernoulli 1", []string{"gen", "--reward", "bernoulli:1", "--out", out}, "bernoulli:1"},
		{"gen tasks 0", []string{"gen", "--tasks", "0", "--out", out}, "--tasks 0 is outside"},
		{"gen runs<0", []string{"gen", "--runs", "-2", "--out", out}, "--runs -2 is outside"},
		{"sql var bucket 0", []string{"sql", "--store", demo, "--query", "group_std", "--var", "bucket=0"}, "--var bucket: 0 is outside its valid range (0,inf)"},
		{"sql var bucket nan", []string{"sql", "--store", demo, "--query", "group_std", "--var", "bucket=nan"}, "--var bucket: NaN is outside"},
		{"sql var k text", []string{"sql", "--store", demo, "--query", "pass_at_k", "--var", "k=many"}, "--var k=many: want a number"},
		{"sql var std_threshold nan", []string{"sql", "--store", demo, "--query", "group_filter", "--var", "std_threshold=nan"}, "--var std_threshold"},
		{"sql var k fraction", []string{"sql", "--store", demo, "--query", "pass_at_k", "--var", "k=2.5"}, "--var k=2.5: want an integer in [1,1000000]"},
		{"sql var bucket fraction", []string{"sql", "--store", demo, "--query", "logprob_by_position", "--var", "bucket=1.5"}, "--var bucket=1.5: want an integer"},
		{"sql threads<0", []string{"sql", "--store", demo, "--threads", "-1", "SELECT 1"}, "--threads -1 is outside"},
		// class 8: sizes bounded up front.
		{"report std-threshold nan", []string{"report", demo, "--out", out, "--std-threshold", "nan"}, "--std-threshold NaN is outside"},
		{"report bins 1e8", []string{"report", demo, "--out", out, "--bins", "100000000"}, "--bins 100000000 is outside its valid range [1,1000]"},
		{"report bins 0", []string{"report", demo, "--out", out, "--bins", "0"}, "--bins 0 is outside"},
		{"run shards 1e11", run("--advantage-fn", "grpo", "--shards", "100000000000", "--shard", "0"), "--shards 100000000000 is outside its valid range [1,10000]"},
		{"run shard 1e5", run("--advantage-fn", "grpo", "--shards", "2", "--shard", "100000"), "--shard 100000 is outside"},
		{"gen resp-len 3e9", []string{"gen", "--resp-len", "3000000000", "--out", out}, "3000000000"},
		{"gen resp-len range 3e9", []string{"gen", "--resp-len", "1:3000000000", "--out", out}, "MAX <= 131072"},
		{"gen prompt-len 1e9", []string{"gen", "--prompt-len", "1000000000", "--out", out}, "--prompt-len 1000000000 is outside"},
		{"gen rows overflow", []string{"gen", "--tasks", "1073741824", "--runs", "1073741824", "--out", out}, "at most"},
		{"bench shape 1e8x1e8", []string{"bench", "loss", "--fn", "ppo", "--shape", "100000000x100000000"}, "at most 67108864"},
		{"bench shape float", []string{"bench", "loss", "--fn", "ppo", "--shape", "1e8x1e8"}, "want BxT"},
		{"bench runs 0", []string{"bench", "loss", "--fn", "ppo", "--runs", "0"}, "--runs 0 is outside"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			args := append([]string(nil), tc.args...)
			for i, a := range args {
				if a == out {
					args[i] = filepath.Join(dir, "out.parquet")
				}
			}
			_, stderr, code := runCLI(t, args...)
			if code != 2 {
				t.Fatalf("exit %d, want 2: %s", code, stderr)
			}
			checkOneLine(t, stderr, tc.want)
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("left %v behind", ents)
			}
		})
	}
}

// TestHelpDefaultsInRange: no command's help shows a numeric default outside
// the flag's own range (a default that means "unset" says so in words).
func TestHelpDefaultsInRange(t *testing.T) {
	re := regexp.MustCompile(`\(range ([\[(])([^,]+),([^\])]+)([\])])\) \(default: ([^)]*)\)`)
	bound := func(s string) float64 {
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			t.Fatalf("range bound %q: %v", s, err)
		}
		return f
	}
	seen := 0
	for _, cmd := range newApp().Commands {
		for _, f := range cmd.Flags {
			m := re.FindStringSubmatch(f.String())
			if m == nil {
				continue
			}
			seen++
			v, err := strconv.ParseFloat(m[5], 64)
			if err != nil {
				continue // words, not a number
			}
			lo, hi := bound(m[2]), bound(m[3])
			if v < lo || v > hi || (m[1] == "(" && v == lo) || (m[4] == ")" && v == hi) {
				t.Errorf("%s: %s", cmd.Name, f.String())
			}
		}
	}
	if seen < 10 {
		t.Fatalf("only %d ranged flags found in the help texts", seen)
	}
}

// TestReferenceRangesAccepted: values upstream accepts and computes with
// are accepted (exit 0): a negative entropy or KL coefficient, a grpo
// epsilon of 0, a negative reward_std_filter threshold, m2po's
// batch_num_tokens 0, a negative ppo clip range.
func TestReferenceRangesAccepted(t *testing.T) {
	demo := "../../fixtures/stores/demo.parquet"
	scored := filepath.Join(t.TempDir(), "scored.parquet") // with advantages, for the losses
	for _, args := range [][]string{
		{"run", "--in", demo, "--advantage-fn", "grpo", "--arg", "epsilon=0", "--arg", "std_threshold=-1", "--progress", "never", "--out", scored},
		{"run", "--in", demo, "--operator", "reward_std_filter", "--arg", "reward_std_filter.threshold=-1", "--advantage-fn", "grpo", "--progress", "never",
			"--out", filepath.Join(t.TempDir(), "out.parquet")},
		{"loss", "--fn", "ppo", "--in", scored, "--entropy-coef", "-0.01", "--col", "entropy=logprobs", "--kl-coef", "-0.1", "--arg", "clip_range=-0.1"},
		{"loss", "--fn", "m2po", "--in", scored, "--arg", "batch_num_tokens=0"},
	} {
		if _, stderr, code := runCLI(t, args...); code != 0 {
			t.Errorf("%v: exit %d: %s", args, code, stderr)
		}
	}
}
