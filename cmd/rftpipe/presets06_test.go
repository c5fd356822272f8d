package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPresets06RunAndLoss runs the 0.6 line's algorithm types end to end on
// the bundled stores: `run --algorithm`, then `loss --algorithm` on its
// output, each writing what its default config says.
func TestPresets06RunAndLoss(t *testing.T) {
	t.Chdir("../..")
	for _, tc := range []struct {
		algo, in     string
		rows         int64  // rows written
		metric, loss string // a run metric; the loss fn
	}{
		{"dapo", "fixtures/stores/demo.parquet", 384, "experience_pipeline/group_advantages/reward_mean/mean", "ppo"},
		{"gigpo", "fixtures/stores/gigpo.parquet", 192, "experience_pipeline/gigpo/anchor_groups_total", "ppo"},
		{"m2po", "fixtures/stores/full.parquet", 256, "experience_pipeline/group_advantages/reward_mean/mean", "m2po"},
	} {
		t.Run(tc.algo, func(t *testing.T) {
			dir := t.TempDir()
			out, metrics := filepath.Join(dir, "out.parquet"), filepath.Join(dir, "m.json")
			_, stderr, code := runCLI(t, "run", "--algorithm", tc.algo, "--in", tc.in, "--out", out, "--metrics", metrics, "--progress", "never")
			if code != 0 {
				t.Fatalf("run: exit %d: %s", code, stderr)
			}
			if _, rows := storeShape(t, out); rows != tc.rows {
				t.Errorf("%d rows written, want %d", rows, tc.rows)
			}
			var m map[string]any
			raw, err := os.ReadFile(metrics)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatal(err)
			}
			if m[tc.metric] == nil {
				t.Errorf("no %s: %v", tc.metric, m)
			}
			stdout, stderr, code := runCLI(t, "loss", "--algorithm", tc.algo, "--in", out, "--format", "json")
			if code != 0 {
				t.Fatalf("loss: exit %d: %s", code, stderr)
			}
			var lo struct {
				Fn      string             `json:"fn"`
				Metrics map[string]float64 `json:"metrics"`
			}
			if err := json.Unmarshal([]byte(stdout), &lo); err != nil {
				t.Fatal(err)
			}
			if lo.Fn != tc.loss {
				t.Errorf("loss fn %s, want %s", lo.Fn, tc.loss)
			}
			_, kl := lo.Metrics["actor/kl_loss"]
			if want := tc.algo == "gigpo"; kl != want { // dapo, m2po: no reference model, no KL loss
				t.Errorf("actor/kl_loss present %v, want %v", kl, want)
			}
			if _, ok := lo.Metrics["actor/m2po/m2_before"]; ok != (tc.algo == "m2po") {
				t.Errorf("m2po metrics present %v: %v", ok, lo.Metrics)
			}
		})
	}
	// m2po's guards, as upstream's validator: the loss must be m2po and the
	// old log-probs the rollout's.
	for _, src := range []string{
		"algorithm: {algorithm_type: m2po, policy_loss_fn: ppo}\n",
		"algorithm: {algorithm_type: m2po, bypass_old_logprobs: false}\n",
	} {
		cfg := filepath.Join(t.TempDir(), "job.yaml")
		if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		_, stderr, code := runCLI(t, "loss", "--config", cfg, "--in", "fixtures/stores/full.parquet")
		if code != 2 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "m2po") {
			t.Errorf("%s: exit %d: %s; want exit 2, one line naming m2po", strings.TrimSpace(src), code, stderr)
		}
	}
}

// TestStalenessControl: sample_strategy staleness_control reads only the
// rows with model_version ≥ max(step − max_staleness, 0), in store order;
// the others are dropped before the advantage fn sees the store, counted,
// and recorded in a rejected-rows store as stale_model_version. The bundled
// demo store has model versions 0, 1 and 2 (128 rows each).
func TestStalenessControl(t *testing.T) {
	t.Chdir("../..")
	dir := t.TempDir()
	job := func(extra string) string {
		cfg := filepath.Join(dir, "job"+extra+".yaml")
		src := "algorithm:\n  algorithm_type: grpo\n  sample_strategy: staleness_control\n" + extra
		if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	limited := job("  sample_strategy_args: {max_staleness: 1}\n")
	unlimited := job("")
	ahead := job("  sample_strategy_args: {max_staleness: -1}\n") // upstream takes it: versions after the step
	for _, tc := range []struct {
		name, cfg, step string
		rows            int64
		warn            string
	}{
		{"no limit", unlimited, "5", 384, ""},
		{"step 1: min version 0", limited, "1", 384, ""},
		{"step 2: min version 1", limited, "2", 256, ""},
		{"step 3: min version 2", limited, "3", 128, ""},
		{"no step: every version, warned", limited, "", 384, "no --step"},
		{"largest step: min version past every one", limited, "9223372036854775807", 0, ""},
		{"negative max_staleness: min version 2", ahead, "1", 128, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, rej, metrics := filepath.Join(dir, "out.parquet"), filepath.Join(dir, "rej.parquet"), filepath.Join(dir, "m.json")
			args := []string{"run", "--config", tc.cfg, "--in", "fixtures/stores/demo.parquet", "--out", out, "--rejected", rej, "--metrics", metrics, "--progress", "never"}
			if tc.step != "" {
				args = append(args, "--step", tc.step)
			}
			_, stderr, code := runCLI(t, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if !strings.Contains(stderr, tc.warn) {
				t.Errorf("stderr %q, want %q", stderr, tc.warn)
			}
			if _, rows := storeShape(t, out); rows != tc.rows {
				t.Errorf("%d rows written, want %d", rows, tc.rows)
			}
			stale := 0
			for _, r := range rejectedRows(t, rej) {
				if strings.Contains(r, "stale_model_version staleness_control") {
					stale++
				}
			}
			if want := 384 - int(tc.rows); stale != want {
				t.Errorf("%d stale rows rejected, want %d", stale, want)
			}
			raw, err := os.ReadFile(metrics)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatal(err)
			}
			if got, ok := m["experience_pipeline/staleness_control/filtered_count"]; ok != (stale > 0) || ok && got != float64(stale) {
				t.Errorf("filtered_count %v (present %v), want %d", got, ok, stale)
			}
		})
	}
	// A store without model_version: an error naming the column, when the
	// predicate filters anything.
	noVersion := filepath.Join(dir, "nov.jsonl")
	var b strings.Builder
	for r := 0; r < 4; r++ {
		fmt.Fprintf(&b, `{"eid":{"batch":0,"task":"t","run":%d,"step":0},"reward":%d,"prompt_length":1,"tokens":[1,2],"logprobs":[-0.1],"action_mask":[true]}`+"\n", r, r%2)
	}
	if err := os.WriteFile(noVersion, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runCLI(t, "run", "--config", limited, "--in", noVersion, "--out", filepath.Join(dir, "nov.parquet"), "--step", "3", "--progress", "never")
	if code != 2 || !strings.Contains(stderr, "model_version") {
		t.Errorf("no model_version: exit %d: %s; want exit 2 naming the column", code, stderr)
	}
	if _, stderr, code := runCLI(t, "run", "--config", limited, "--in", noVersion, "--out", filepath.Join(dir, "nov.parquet"), "--step", "1", "--progress", "never"); code != 0 {
		t.Errorf("no model_version, nothing filtered: exit %d: %s", code, stderr)
	}
}

// TestListArg: a list value in --arg (gdpo's reward_weights) survives the
// flag parser's comma split; its length is checked against the store's
// reward components (multireward.parquet has two).
func TestListArg(t *testing.T) {
	t.Chdir("../..")
	dir := t.TempDir()
	sums := map[string][32]byte{}
	for _, w := range []string{"1,0.5", "1,1"} {
		out := filepath.Join(dir, w+".parquet")
		_, stderr, code := runCLI(t, "run", "--advantage-fn", "gdpo", "--arg", "reward_weights="+w, "--arg", "num_generations=8",
			"--in", "fixtures/stores/multireward.parquet", "--out", out, "--progress", "never")
		if code != 0 {
			t.Fatalf("weights %s: exit %d: %s", w, code, stderr)
		}
		sums[w] = fileSum(t, out)
	}
	if sums["1,0.5"] == sums["1,1"] {
		t.Error("reward_weights 1,0.5 and 1,1 wrote the same advantages")
	}
	_, stderr, code := runCLI(t, "run", "--advantage-fn", "gdpo", "--arg", "reward_weights=1,0.5,2",
		"--in", "fixtures/stores/multireward.parquet", "--out", filepath.Join(dir, "bad.parquet"), "--progress", "never")
	if code != 2 || !strings.Contains(stderr, "3 values for 2 reward components") {
		t.Errorf("three weights: exit %d: %s", code, stderr)
	}
}
