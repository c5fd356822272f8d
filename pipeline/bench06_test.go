package pipeline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
	"time"

	"github.com/rftpipe/rftpipe/pipeline/algorithm"
	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/schema/synth"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/objective"
	"github.com/rftpipe/rftpipe/stages/operator"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// BenchmarkFns06 times the 0.6 line's fns against their baselines in one
// run, on a generated store of tasks × 8 runs × 256 tokens with advantages
// and current log-probs (12,500 tasks, 100,000 experiences, unless
// RFTPIPE_BENCH_TASKS says otherwise): `run` with gigpo and cod (standard
// mode) as a ratio to grpo, and `loss` with m2po (its selection pass
// included) as a ratio to ppo; the 0.6 line's algorithm types as `run
// --algorithm` and `loss --algorithm` build them from their resolved default
// configs: dapo (and dapo with its example's operators
// mask_response_truncated, dapo_dynamic_sampling) and gigpo as ratios to
// the grpo preset (dapo with its operators also as a ratio to its floor: its
// input decoded, its output encoded, see floor; and to the floor and its
// group pass together), m2po's loss as a ratio to
// ppo's. The store's info holds
// the anchor states gigpo groups by (gen --info). Each job takes turns for
// three rounds and keeps its fastest time; peak_RSS_MiB is the process's
// peak over them.
//
//	go test -run '^$' -bench BenchmarkFns06 -benchtime 1x ./pipeline
//	RFTPIPE_BENCH_TASKS=125000 go test -run '^$' -bench BenchmarkFns06 -benchtime 1x -timeout 1h ./pipeline   # 1M
func BenchmarkFns06(b *testing.B) {
	tasks := 12_500
	if s := os.Getenv("RFTPIPE_BENCH_TASKS"); s != "" {
		fmt.Sscan(s, &tasks)
	}
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(store.HeapLimit))
	cfg := synth.Default()
	cfg.Tasks, cfg.TasksPerBatch, cfg.Seed = tasks, 256, 1
	cfg.With, cfg.Info = []string{schema.Advantages, schema.Logprob}, true
	in := filepath.Join(os.TempDir(), fmt.Sprintf("rftpipe-bench06-%dx%d-%d-info.parquet", cfg.Tasks, cfg.Runs, cfg.RespMax))
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
	dapoOut := filepath.Join(b.TempDir(), "dapo.parquet")
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
	for _, algo := range []string{"grpo", "dapo", "gigpo", "m2po"} {
		res, err := algorithm.Resolve(algorithm.Config{AlgorithmType: algo}, nil, algorithm.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if algo == "m2po" {
			jobs["algorithm/m2po/loss"] = func() (Job, error) {
				o, err := res.Objective()
				return Job{In: in, Stages: []Stage{NewLoss(o, tokens.CPU, nil, 1)}}, err
			}
			continue
		}
		jobs["algorithm/"+algo] = func() (Job, error) {
			f, err := res.PipelineAdvantage()
			return Job{In: in, Out: out, Stages: PipelineSide(algo, f)}, err
		}
	}
	jobs["algorithm/dapo+ops"] = func() (Job, error) {
		var ops []Operator
		for _, name := range []string{"mask_response_truncated", "dapo_dynamic_sampling"} {
			op, err := operator.New(operator.Default(), name, nil)
			if err != nil {
				return Job{}, err
			}
			ops = append(ops, Operator{Name: name, Op: op})
		}
		j, err := jobs["algorithm/dapo"]()
		j.Stages = append([]Stage{Operators(ops)}, j.Stages...)
		j.Out = dapoOut
		return j, err
	}
	order := []string{"grpo", "gigpo", "cod", "loss/ppo", "loss/m2po",
		"algorithm/grpo", "algorithm/dapo", "algorithm/dapo+ops", "algorithm/gigpo", "algorithm/m2po/loss"}
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
		b.ReportMetric(times["algorithm/dapo"]/times["algorithm/grpo"], "preset_dapo/grpo")
		b.ReportMetric(times["algorithm/dapo+ops"]/times["algorithm/grpo"], "preset_dapo_ops/grpo")
		// dapo's operators drop rows from nearly every row group: its floor
		// decodes every column, encodes the kept rows' and writes them.
		b.StopTimer()
		fl := newFloor(b, in, dapoOut, columnNames(b, in), encodedOnce(columnNames(b, dapoOut)), true)
		b.StartTimer()
		floor := fastest(b, fl.run)
		b.ReportMetric(times["algorithm/dapo+ops"]/floor, "preset_dapo_ops/floor")
		// The group pass grpo pays too, which dapo's operators need: the
		// floor's work and it are the least the job does.
		job, err := jobs["algorithm/dapo+ops"]()
		if err != nil {
			b.Fatal(err)
		}
		groups := fastest(b, func() error { return groupPassOf(job) })
		b.ReportMetric(times["algorithm/dapo+ops"]/(floor+groups), "preset_dapo_ops/floor_plus_groups")
		b.ReportMetric(times["algorithm/gigpo"]/times["algorithm/grpo"], "preset_gigpo/grpo")
		b.ReportMetric(times["algorithm/m2po/loss"]/times["loss/ppo"], "preset_m2po_loss/ppo")
	}
	b.ReportMetric(peakRSS(), "peak_RSS_MiB")
}

// fastest returns the fastest of three runs of f, in seconds (as the
// jobs' times are taken).
func fastest(b *testing.B, f func() error) float64 {
	var best float64
	for range 3 {
		debug.FreeOSMemory()
		start := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		if d := time.Since(start).Seconds(); best == 0 || d < best {
			best = d
		}
	}
	return best
}

// groupPassOf runs the group pass of job alone, as Run runs it.
func groupPassOf(job Job) error {
	r, err := store.Open(job.In)
	if err != nil {
		return err
	}
	defer r.Close()
	cols := newColumns(r.Files()[0], r.Schema(), job.Columns)
	if err := prepare(&job, cols); err != nil {
		return err
	}
	tmp, err := store.TempDir()
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	_, err = grouping(context.Background(), &job, r, cols, tmp, &Result{Metrics: agg.Metrics{}, Weights: agg.Metrics{}})
	return err
}
