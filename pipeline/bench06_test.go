package pipeline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
	"time"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/schema/synth"
	"github.com/rftpipe/rftpipe/stages/objective"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// BenchmarkFns06 times the 0.6 line's fns against their baselines in one
// run, on a generated store of tasks × 8 runs × 256 tokens with advantages
// and current log-probs (12,500 tasks, 100,000 experiences, unless
// RFTPIPE_BENCH_TASKS says otherwise): `run` with gigpo and cod (standard
// mode) as a ratio to grpo, and `loss` with m2po (its two selection passes
// included) as a ratio to ppo. Each job takes turns for three rounds and
// keeps its fastest time; peak_RSS_MiB is the process's peak over them.
//
//	go test -run '^$' -bench BenchmarkFns06 -benchtime 1x ./pipeline
//	RFTPIPE_BENCH_TASKS=125000 go test -run '^$' -bench BenchmarkFns06 -benchtime 1x -timeout 1h ./pipeline   # 1M
func BenchmarkFns06(b *testing.B) {
	tasks := 12_500
	if s := os.Getenv("RFTPIPE_BENCH_TASKS"); s != "" {
		fmt.Sscan(s, &tasks)
	}
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(HeapLimit))
	cfg := synth.Default()
	cfg.Tasks, cfg.TasksPerBatch, cfg.Seed = tasks, 256, 1
	cfg.With = []string{schema.Advantages, schema.Logprob}
	in := filepath.Join(os.TempDir(), fmt.Sprintf("rftpipe-bench06-%dx%d-%d.parquet", cfg.Tasks, cfg.Runs, cfg.RespMax))
	if _, err := os.Stat(in); err != nil {
		w, err := store.Create(in, cfg.Schema())
		if err != nil {
			b.Fatal(err)
		}
		if err := synth.Generate(context.Background(), cfg, w.Write); err != nil {
			w.Abort()
			b.Fatal(err)
		}
		if err := w.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	out := filepath.Join(b.TempDir(), "out.parquet")
	jobs := map[string]func() (Job, error){}
	for _, fn := range []string{"grpo", "gigpo", "cod"} {
		jobs[fn] = func() (Job, error) {
			st, err := stagesOf(fn, "", nil)
			return Job{In: in, Out: out, Stages: st}, err
		}
	}
	for _, fn := range []string{"ppo", "m2po"} {
		jobs["loss/"+fn] = func() (Job, error) {
			o, err := objective.New(objective.Config{PolicyLoss: fn, KLLoss: "none", Entropy: "none"})
			if err != nil {
				return Job{}, err
			}
			return Job{In: in, Stages: []Stage{NewLoss(o, tokens.CPU, nil, 1)}}, nil
		}
	}
	order := []string{"grpo", "gigpo", "cod", "loss/ppo", "loss/m2po"}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		resetPeakRSS()
		times := map[string]float64{}
		for range 3 {
			for _, name := range order {
				job, err := jobs[name]()
				if err != nil {
					b.Fatal(err)
				}
				debug.FreeOSMemory()
				start := time.Now()
				if _, err := Run(context.Background(), job); err != nil {
					b.Fatal(name, ": ", err)
				}
				if d := time.Since(start).Seconds(); times[name] == 0 || d < times[name] {
					times[name] = d
				}
			}
		}
		b.ReportMetric(float64(tasks*8)/times["grpo"], "grpo_exp/s")
		b.ReportMetric(times["gigpo"]/times["grpo"], "gigpo/grpo")
		b.ReportMetric(times["cod"]/times["grpo"], "cod/grpo")
		b.ReportMetric(times["loss/m2po"]/times["loss/ppo"], "m2po/ppo")
	}
	b.ReportMetric(peakRSS(), "peak_RSS_MiB")
}
