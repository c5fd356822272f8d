package main

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/loss"
	"github.com/rftpipe/rftpipe/stages/rollout"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// TestRolloutCorrectionJob: `run --config` with a rollout_correction section
// writes rollout_is_weights and the rejection-sampled action_mask; `loss`
// over that output gives the loss of verl's decoupled call form (the
// correction over the whole batch, then the policy loss with its weights
// and mask) on the same numbers.
func TestRolloutCorrectionJob(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.parquet"), filepath.Join(dir, "out.parquet")
	if _, stderr, code := runCLI(t, "gen", "--tasks", "24", "--runs", "4", "--resp-len", "8:40", "--with", "old_logprob",
		"--seed", "9", "--out", in, "--progress", "never"); code != 0 {
		t.Fatalf("gen: %s", stderr)
	}
	section := map[string]any{"rollout_is": "token", "rollout_is_threshold": 1.02, "rollout_rs": "token_k1", "rollout_rs_threshold": "0.99_1.01"}
	cfg := filepath.Join(dir, "job.yaml")
	src := "algorithm:\n  algorithm_type: grpo\n  rollout_correction:\n    rollout_is: token\n    rollout_is_threshold: 1.02\n" +
		"    rollout_rs: token_k1\n    rollout_rs_threshold: \"0.99_1.01\"\ninput: in.parquet\noutput: out.parquet\nmetrics: m.json\n"
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := runCLI(t, "run", "--config", cfg, "--progress", "never"); code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	stdout, stderr, code := runCLI(t, "loss", "--fn", "ppo", "--in", out, "--format", "json")
	if code != 0 {
		t.Fatalf("loss: exit %d: %s", code, stderr)
	}
	var got lossOutput
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatal(err)
	}

	// The decoupled call form on the input's numbers.
	cols, lens := readLists(t, in, schema.Logprobs, schema.OldLogprob, schema.ActionMask)
	outCols, _ := readLists(t, out, schema.Advantages)
	adv := outCols[schema.Advantages]
	rows := agg.NewRows(lens)
	cfgR, err := rollout.Parse(section)
	if err != nil {
		t.Fatal(err)
	}
	c, err := rollout.New(cfgR)
	if err != nil {
		t.Fatal(err)
	}
	w, mask, m, err := c.Correct(rollout.Input{Rows: rows, Old: cols[schema.OldLogprob], Rollout: cols[schema.Logprobs], Mask: cols[schema.ActionMask]})
	if err != nil {
		t.Fatal(err)
	}
	rejected := 0.0
	for i := range w {
		w[i] = float64(float32(w[i])) // the store holds float32
		rejected += cols[schema.ActionMask][i] - mask[i]
	}
	if rejected == 0 || len(m) == 0 {
		t.Fatalf("the correction rejected nothing: the test would not test the mask")
	}
	b := tokens.New(rows)
	for name, v := range map[string][]float64{tokens.LogProb: cols[schema.Logprobs], tokens.OldLogProb: cols[schema.OldLogprob],
		tokens.Advantages: adv, tokens.ActionMask: mask, tokens.RolloutISWeights: w} {
		if err := b.Set(name, v); err != nil {
			t.Fatal(err)
		}
	}
	l, err := loss.New(loss.Default(), "ppo", nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := l.Eval(b, make([]float64, rows.Tokens()))
	if err != nil {
		t.Fatal(err)
	}
	if got.Loss == nil || math.Abs(*got.Loss-want.Loss) > 1e-9*math.Max(1, math.Abs(want.Loss)) {
		t.Errorf("loss over the run's output %v, decoupled call form %v", got.Loss, want.Loss)
	}
}

// readLists reads list columns of a store as float64 values, flat, and the
// row lengths (of the first column).
func readLists(t *testing.T, path string, names ...string) (map[string][]float64, []int) {
	t.Helper()
	r, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	out := map[string][]float64{}
	var lens []int
	err = r.ForEach(context.Background(), func(rec arrow.Record) error {
		for k, name := range names {
			l := rec.Column(rec.Schema().FieldIndices(name)[0]).(*array.List)
			for i := 0; i < l.Len(); i++ {
				lo, hi := l.ValueOffsets(i)
				if k == 0 {
					lens = append(lens, int(hi-lo))
				}
				for j := lo; j < hi; j++ {
					switch v := l.ListValues().(type) {
					case *array.Float32:
						out[name] = append(out[name], float64(v.Value(int(j))))
					case *array.Boolean:
						out[name] = append(out[name], map[bool]float64{true: 1}[v.Value(int(j))])
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, lens
}
