package pipeline

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/schema/synth"
	"github.com/rftpipe/rftpipe/stages/objective"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// synthStore writes a generated store of tasks × 8 runs with every trainer
// column, in record batches (row groups) of chunk rows, into dir.
func synthStore(t testing.TB, dir string, tasks, chunk int) string {
	t.Helper()
	cfg := synth.Default()
	cfg.Tasks, cfg.TasksPerBatch, cfg.RespMin, cfg.RespMax, cfg.PromptLen = tasks, 64, 8, 96, 16
	cfg.With, cfg.ChunkRows, cfg.Seed = synth.TrainerColumns, chunk, 3
	path := filepath.Join(dir, fmt.Sprintf("in%d.parquet", tasks))
	w, err := store.Create(path, cfg.Schema())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if err := synth.Generate(context.Background(), cfg, w.Write); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSameBytesWhateverTheCores: each job writes the same bytes at
// GOMAXPROCS 1 and 8 (the decode, the kernels' chunk workers and the
// encode spread over the cores; their results are merged in a fixed
// order), over a store of several row groups.
func TestSameBytesWhateverTheCores(t *testing.T) {
	dir := t.TempDir()
	in := synthStore(t, dir, 400, 700)
	jobs := []struct {
		name string
		job  func(out string) Job
	}{
		{"grpo", func(out string) Job { return withFn(t, Job{In: in, Out: out, Seed: 5}, "grpo", "") }},
		{"grpo_duplication", func(out string) Job {
			return withFn(t, Job{In: in, Out: out, Seed: 5}, "grpo", "", "std_threshold=0", "duplicate_experiences=true")
		}},
		{"rloo", func(out string) Job { return withFn(t, Job{In: in, Out: out}, "rloo", "") }},
		{"reinforceplusplus", func(out string) Job { return withFn(t, Job{In: in, Out: out}, "reinforceplusplus", "") }},
		{"loss_grad_out", func(out string) Job {
			o, err := objective.New(objective.Config{PolicyLoss: "ppo", KLLoss: "k3", KLCoef: 0.01, Entropy: "default", EntropyCoef: 0.001})
			if err != nil {
				t.Fatal(err)
			}
			return Job{In: in, Out: out, Objective: o, Keep: []string{schema.Batch, schema.Task, schema.Run, schema.Step},
				Stages: []Stage{NewLoss(o, tokens.CPU, nil, 1)}}
		}},
	}
	for _, c := range jobs {
		t.Run(c.name, func(t *testing.T) {
			var sums []string
			for _, procs := range []int{1, 8} {
				out := filepath.Join(dir, fmt.Sprintf("%s_%d.parquet", c.name, procs))
				prev := runtime.GOMAXPROCS(procs)
				_, err := Run(context.Background(), c.job(out))
				runtime.GOMAXPROCS(prev)
				if err != nil {
					t.Fatalf("GOMAXPROCS %d: %v", procs, err)
				}
				b, err := os.ReadFile(out)
				if err != nil {
					t.Fatal(err)
				}
				if len(b) < 1000 {
					t.Fatalf("GOMAXPROCS %d: %d bytes written", procs, len(b))
				}
				sums = append(sums, fmt.Sprintf("%x", sha256.Sum256(b)))
			}
			if sums[0] != sums[1] {
				t.Errorf("GOMAXPROCS 1 wrote %s, 8 wrote %s", sums[0], sums[1])
			}
		})
	}
}

// TestMemoryFlatInStoreSize: the live heap of a streaming job (GRPO, and
// the trainer-side reinforceplusplus with its statistics pass) does not
// grow with the store: a store 8× the rows peaks at about the same live
// heap, sampled as the job runs.
func TestMemoryFlatInStoreSize(t *testing.T) {
	if testing.Short() {
		t.Skip("generates two stores")
	}
	dir := t.TempDir()
	small, large := synthStore(t, dir, 300, 600), synthStore(t, dir, 2400, 600)
	for _, fn := range []string{"grpo", "reinforceplusplus"} {
		t.Run(fn, func(t *testing.T) {
			peak := func(in string) uint64 {
				runtime.GC()
				stop, done := make(chan struct{}), make(chan uint64)
				var once sync.Once
				go func() {
					s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
					var top uint64
					tick := time.NewTicker(time.Millisecond)
					defer tick.Stop()
					for {
						metrics.Read(s)
						top = max(top, s[0].Value.Uint64())
						select {
						case <-stop:
							done <- top
							return
						case <-tick.C:
						}
					}
				}()
				defer once.Do(func() { close(stop) })
				run(t, withFn(t, Job{In: in, Out: filepath.Join(dir, fn+".parquet")}, fn, ""))
				runtime.GC() // the last live heap of the job, measured
				once.Do(func() { close(stop) })
				return <-done
			}
			a, b := peak(small), peak(large)
			t.Logf("peak live heap: 2,400 rows %.1f MiB, 19,200 rows %.1f MiB", float64(a)/(1<<20), float64(b)/(1<<20))
			// 8× the rows: at most 1.6× the heap (what grows is the
			// statistics pass's per-row scores, 12 bytes a row, and the
			// writer's row group filling up to its size)
			if float64(b) > 1.6*float64(a)+(4<<20) {
				t.Errorf("peak live heap grew from %d to %d bytes with 8× the rows", a, b)
			}
		})
	}
}
