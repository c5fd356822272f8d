package builder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"

	"github.com/rftpipe/rftpipe/schema/store"
)

// readOutput returns, per row of a store, its tid, reward and advantages.
func readOutput(t *testing.T, path string) (tids []string, rewards []float64, adv [][]float32) {
	t.Helper()
	r, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		col := func(n string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(n)[0]) }
		b, k := col("batch").(*array.Int64), col("task").(*array.Int64)
		rw := col("reward").(*array.Float64)
		l := col("advantages").(*array.List)
		vals := l.ListValues().(*array.Float32)
		for i := 0; i < int(rec.NumRows()); i++ {
			tids = append(tids, fmt.Sprintf("%d/%d", b.Value(i), k.Value(i)))
			rewards = append(rewards, rw.Value(i))
			lo, hi := l.ValueOffsets(i)
			adv = append(adv, append([]float32(nil), vals.Float32Values()[lo:hi]...))
		}
	}
}

// repoRoot is the repository's root, from this package's directory.
const repoRoot = "../.."

// runConfig runs the job file text over the demo store, into a temp
// directory, through Run.
func runConfig(t *testing.T, text string) *RunReport {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	o := &RunOptions{Common: Common{Config: file, In: filepath.Join(repoRoot, "fixtures/stores/demo.parquet")}, Out: filepath.Join(dir, "out.parquet")}
	res, err := Run(context.Background(), o, func(error) int { return 0 })
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestTrainerSideRLOO checks the trainer-side run against RLOO computed
// here from the rewards: advantage = reward − mean of the other rows of
// the task, on every token (the bundled single-turn store masks none).
func TestTrainerSideRLOO(t *testing.T) {
	out := runConfig(t, "algorithm: {algorithm_type: rloo}\n")
	if out.In != 384 || out.Out != 384 || out.Groups != 48 {
		t.Errorf("result %+v", out)
	}
	tids, rewards, adv := readOutput(t, out.Store)
	sum, n := map[string]float64{}, map[string]float64{}
	for i, tid := range tids {
		sum[tid] += rewards[i]
		n[tid]++
	}
	for i, tid := range tids {
		want := rewards[i] - (sum[tid]-rewards[i])/(n[tid]-1)
		for _, a := range adv[i] {
			if math.Abs(float64(a)-want) > 1e-5 {
				t.Fatalf("row %d: advantage %v, want %v", i, a, want)
			}
		}
	}
}

// TestTrainerSideKLPenaltyWithoutReference checks quirk Q-09's intended
// branch: a KL penalty on a store without ref_log_prob leaves the rewards
// and reports kl and kl_coef 0.
func TestTrainerSideKLPenaltyWithoutReference(t *testing.T) {
	out := runConfig(t, "algorithm: {algorithm_type: reinforceplusplus, kl_penalty_fn: k1}\n")
	if v, ok := out.Metrics["critic/kl_coef"]; !ok || v != 0 {
		t.Errorf("metrics %v, want critic/kl_coef 0", out.Metrics)
	}
}

func TestWriteProm(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.prom")
	m := map[string]float64{
		"experience_pipeline/group_advantages/reward_mean/mean": 0.5,
		"time/experience_pipeline/total":                        1.25,
		"actor/pg-loss":                                         math.NaN(),
		"actor/pg loss":                                         math.Inf(1),
	}
	o := Outcome{Label: `nightly "grpo"\c`, Metrics: m, ExitCode: 2, Start: time.Unix(100, 0), Duration: 1500 * time.Millisecond}
	if err := WriteProm(context.Background(), path, o); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	labels := `{job="nightly \"grpo\"\\c"}`
	for _, want := range []string{
		"# TYPE rftpipe_experience_pipeline_group_advantages_reward_mean_mean gauge\n",
		"rftpipe_experience_pipeline_group_advantages_reward_mean_mean" + labels + " 0.5\n",
		"rftpipe_time_experience_pipeline_total" + labels + " 1.25\n",
		"rftpipe_actor_pg_loss" + labels + " +Inf\n",
		"rftpipe_actor_pg_loss_2" + labels + " NaN\n",
		"rftpipe_last_run_timestamp_seconds" + labels + " 100\n",
		"rftpipe_success" + labels + " 0\n",
		"rftpipe_exit_code" + labels + " 2\n",
		"rftpipe_duration_seconds" + labels + " 1.5\n",
	} {
		if !strings.Contains(string(got), want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*tmp*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	if err := WriteProm(context.Background(), filepath.Join(t.TempDir(), "no", "dir.prom"), Outcome{Metrics: m}); err == nil {
		t.Error("write into a missing directory: no error")
	}
}
