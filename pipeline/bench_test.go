package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow/go/v17/arrow"

	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/schema/synth"
)

// The issue-4 end-to-end benchmark: 125,000 tasks × 8 runs, 256 response
// tokens. The store is generated once with synth and kept in the temp dir
// across runs (delete it to regenerate). Each iteration times, in the same
// run, a plain read + rewrite of the store with the same reader and writer
// settings (the I/O floor) and `rftpipe run --advantage-fn grpo`, and reports
// experiences/s, the ratio to the floor and the process's peak RSS:
//
//	go test -run '^$' -bench BenchmarkRun -benchtime 1x ./pipeline
//	RFTPIPE_BENCH_TASKS=500000 go test -run '^$' -bench BenchmarkRun -benchtime 1x ./pipeline   # 4M
func BenchmarkRun(b *testing.B) {
	tasks := 125_000
	if s := os.Getenv("RFTPIPE_BENCH_TASKS"); s != "" {
		fmt.Sscan(s, &tasks)
	}
	in := benchStore(b, tasks)
	out := filepath.Join(b.TempDir(), "out.parquet")
	rows := float64(tasks * 8)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if err := copyStore(in, out, store.ParquetOptions{}); err != nil {
			b.Fatal(err)
		}
		floor := time.Since(start)
		start = time.Now()
		res, err := Run(context.Background(), Job{In: in, Out: out, AdvantageFn: "grpo"})
		if err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		if res.Out != int64(rows) {
			b.Fatalf("%d rows written, want %v", res.Out, rows)
		}
		b.ReportMetric(rows/d.Seconds(), "exp/s")
		b.ReportMetric(rows/floor.Seconds(), "floor_exp/s")
		b.ReportMetric(d.Seconds()/floor.Seconds(), "x_floor")
	}
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	b.ReportMetric(float64(ru.Maxrss)/1024, "peak_RSS_MiB")
}

// benchStore returns the benchmark store of tasks × 8 runs, generating it
// into the temp dir if it is not there yet.
func benchStore(b *testing.B, tasks int) string {
	cfg := synth.Default()
	cfg.Tasks, cfg.TasksPerBatch, cfg.Seed = tasks, 256, 1
	path := filepath.Join(os.TempDir(), fmt.Sprintf("rftpipe-bench-%dx%d-%d.parquet", cfg.Tasks, cfg.Runs, cfg.RespMax))
	if _, err := os.Stat(path); err == nil {
		return path
	}
	w, err := store.Create(path, cfg.Schema())
	if err != nil {
		b.Fatal(err)
	}
	defer w.Abort()
	if err := synth.Generate(context.Background(), cfg, w.Write); err != nil {
		b.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		b.Fatal(err)
	}
	return path
}

// copyStore is the I/O floor: read every batch of in and write it to out,
// with the reading and the writing overlapped as in Run.
func copyStore(in, out string, po store.ParquetOptions) error {
	r, err := store.Open(in)
	if err != nil {
		return err
	}
	defer r.Close()
	w, err := store.Create(out, r.Schema(), store.WithParquet(po))
	if err != nil {
		return err
	}
	defer w.Abort()
	ch := make(chan arrow.Record, 1)
	errc := make(chan error, 1)
	go func() {
		defer close(ch)
		for {
			rec, err := r.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					errc <- err
				}
				return
			}
			rec.Retain()
			ch <- rec
		}
	}()
	for rec := range ch {
		err = w.Write(rec)
		rec.Release()
		if err != nil {
			for rec := range ch {
				rec.Release()
			}
			return err
		}
	}
	select {
	case err := <-errc:
		return err
	default:
	}
	return w.Commit()
}
