package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/sync/errgroup"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/schema/synth"
)

// BenchmarkRun is the end-to-end benchmark over a generated store of tasks ×
// 8 runs with 256 response tokens (125,000 tasks, 1M experiences, unless
// RFTPIPE_BENCH_TASKS says otherwise). The store is generated once, streaming,
// with synth and kept in the temp dir across runs (delete it to regenerate).
// Each iteration times, in the same run: a plain read + rewrite of the store
// with the same reader and writer settings, every column decoded and encoded
// (copy); GRPO with std_threshold=0 and duplicate_experiences=true (filter,
// then refill with seeded copies, which go through a spill store); `rftpipe
// run --advantage-fn grpo`; and the machine's floors for that GRPO job and
// for the duplication job, which decodes and encodes every column (see
// floor). It reports experiences/s of each, the ratios, and the process's
// peak RSS over the jobs (with the heap limit the rftpipe command sets; the
// floor, which holds the bytes it compresses in memory, comes after):
//
//	go test -run '^$' -bench BenchmarkRun -benchtime 1x ./pipeline
//	RFTPIPE_BENCH_TASKS=500000 go test -run '^$' -bench BenchmarkRun -benchtime 1x ./pipeline   # 4M
//	RFTPIPE_BENCH_TASKS=1250000 go test -run '^$' -bench BenchmarkRun -benchtime 1x -timeout 2h ./pipeline   # 10M
func BenchmarkRun(b *testing.B) {
	tasks := 125_000
	if s := os.Getenv("RFTPIPE_BENCH_TASKS"); s != "" {
		fmt.Sscan(s, &tasks)
	}
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(store.HeapLimit)) // as the rftpipe command sets it
	in := benchStore(b, tasks)
	out := filepath.Join(b.TempDir(), "out.parquet")
	rows := float64(tasks * 8)
	dup := withFn(b, Job{In: in, Out: out, Seed: 1}, "grpo", "", "std_threshold=0", "duplicate_experiences=true")
	// Each phase starts from a heap handed back to the OS, as a fresh
	// rftpipe process would: the peak RSS is the largest phase's, not the
	// phases stacked (DuckDB's group pass over the previous phase's heap).
	timed := func(f func() error) time.Duration {
		debug.FreeOSMemory()
		start := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	var peak float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		debug.FreeOSMemory()
		resetPeakRSS() // an earlier run's floor held its buffers in this process
		copied := timed(func() error { return copyStore(in, out, store.ParquetOptions{}) })
		var res, dupRes *Result
		dd := timed(func() (err error) {
			dupRes, err = Run(context.Background(), dup)
			return err
		})
		d := timed(func() (err error) {
			res, err = Run(context.Background(), withFn(b, Job{In: in, Out: out}, "grpo", ""))
			return err
		})
		if res.Out != int64(rows) || dupRes.Filtered == 0 || dupRes.Duplicated == 0 {
			b.Fatalf("grpo wrote %d rows, want %v; with duplication %d filtered, %d duplicated", res.Out, rows, dupRes.Filtered, dupRes.Duplicated)
		}
		// The jobs' peak, before the floor holds the columns it compresses
		// (a GiB of advantages at 1M experiences) in memory.
		peak = max(peak, peakRSS())
		// The floor of the GRPO job just written, built after the jobs ran:
		// its buffers would otherwise weigh on their heap limit.
		b.StopTimer()
		fl := newFloor(b, in, out, []string{"batch", "task", "reward", "action_mask"}, []string{"advantages"}, false)
		b.StartTimer()
		machine := timed(fl.run)
		// The duplication job's floor: every column decoded and encoded (its
		// output has the GRPO output's columns and row count).
		b.StopTimer()
		fl = newFloor(b, in, out, columnNames(b, in), encodedOnce(columnNames(b, out)), true)
		b.StartTimer()
		dupMachine := timed(fl.run)
		b.ReportMetric(rows/d.Seconds(), "exp/s")
		b.ReportMetric(rows/copied.Seconds(), "copy_exp/s")
		b.ReportMetric(d.Seconds()/copied.Seconds(), "x_copy")
		b.ReportMetric(rows/machine.Seconds(), "floor_exp/s")
		b.ReportMetric(d.Seconds()/machine.Seconds(), "x_floor")
		b.ReportMetric(dd.Seconds()/copied.Seconds(), "dup_x_copy")
		b.ReportMetric(rows/dd.Seconds(), "dup_exp/s")
		b.ReportMetric(dd.Seconds(), "dup_s")
		b.ReportMetric(rows/dupMachine.Seconds(), "dup_floor_exp/s")
		b.ReportMetric(dd.Seconds()/dupMachine.Seconds(), "dup_x_floor")
	}
	b.ReportMetric(peak, "peak_RSS_MiB")
}

// floor is the machine's floor for a job: zstd-decompress the bytes of the
// columns it must decode, zstd-compress those of the columns it must encode
// (at the writer's level), put the output's bytes in a file and fsync it, as
// a store is committed. The output's bytes are moved from the input file in
// the kernel (the cheapest way the machine has, as the writer copies the
// column chunks a job passes on), or, for a job that writes every column
// anew (written), written through write(): the compressed bytes, then as
// many again of them as the output holds besides (page headers, footer, a
// column written as another's bytes), so that the file has the output's
// size. The column bytes are their Arrow buffers, gathered before timing;
// the decompressed ones are compressed first, in row-group-sized frames.
type floor struct {
	in, out string
	size    int64    // output bytes
	frames  [][]byte // to decompress
	raw     [][]byte // to compress
	written bool
}

// encodedOnce returns the output columns a job encodes: all of cols but
// returns where advantages is there too (a column of the same array, whose
// bytes the writer writes twice).
func encodedOnce(cols []string) []string {
	if !slices.Contains(cols, schema.Advantages) {
		return cols
	}
	return slices.DeleteFunc(slices.Clone(cols), func(c string) bool { return c == schema.Returns })
}

func newFloor(b *testing.B, in, out string, decode, encode []string, written bool) *floor {
	st, err := os.Stat(out)
	if err != nil {
		b.Fatal(err)
	}
	f := &floor{in: in, out: out + ".floor", size: st.Size(), written: written}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		b.Fatal(err)
	}
	gather := func(path string, cols []string, each func([]byte)) {
		r, err := store.Open(path, store.Columns(cols...))
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		err = r.ForEach(context.Background(), func(rec arrow.Record) error {
			for _, c := range rec.Columns() {
				var buf []byte
				for _, d := range append([]arrow.ArrayData{c.Data()}, c.Data().Children()...) {
					for _, bb := range d.Buffers() {
						if bb != nil {
							buf = append(buf, bb.Bytes()...)
						}
					}
				}
				each(buf)
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	gather(in, decode, func(p []byte) { f.frames = append(f.frames, enc.EncodeAll(p, nil)) })
	gather(out, encode, func(p []byte) { f.raw = append(f.raw, p) })
	return f
}

func (f *floor) run() error {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return err
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return err
	}
	defer dec.Close()
	in, err := os.Open(f.in)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(f.out)
	if err != nil {
		return err
	}
	defer os.Remove(f.out)
	defer out.Close()
	var scratch []byte
	// The work shares the cores as the job's does: the bytes go to the
	// file on one goroutine (from file to file in the kernel where it can:
	// os.File's ReadFrom uses copy_file_range on Linux, as the store writer
	// does), decompression and compression on the others.
	var g errgroup.Group
	g.Go(func() error {
		for _, fr := range f.frames {
			if scratch, err = dec.DecodeAll(fr, scratch[:0]); err != nil {
				return err
			}
		}
		return nil
	})
	// Two buffers take turns: one compressed into, one written.
	full, free := make(chan []byte, 2), make(chan []byte, 2)
	free <- nil
	free <- nil
	g.Go(func() error {
		defer close(full)
		for _, p := range f.raw {
			dst := enc.EncodeAll(p, (<-free)[:0])
			if f.written {
				full <- dst
			} else {
				free <- dst
			}
		}
		return nil
	})
	if f.written {
		var n int64
		var last []byte
		for dst := range full {
			if _, err := out.Write(dst); err != nil {
				return err
			}
			n, last = n+int64(len(dst)), dst
			free <- dst
		}
		for n < f.size && len(last) > 0 {
			k, err := out.Write(last[:min(int64(len(last)), f.size-n)])
			if err != nil {
				return err
			}
			n += int64(k)
		}
	} else if _, err := io.Copy(out, io.LimitReader(in, f.size)); err != nil {
		return err
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return out.Sync()
}

// peakRSS returns the process's peak resident set since the last
// resetPeakRSS, in MiB (Linux's VmHWM; getrusage's since the process began
// elsewhere).
func peakRSS() float64 {
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			var kb float64
			if _, err := fmt.Sscanf(line, "VmHWM: %f kB", &kb); err == nil {
				return kb / 1024
			}
		}
	}
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Maxrss) / 1024
}

// resetPeakRSS starts peakRSS over (Linux: clear_refs 5).
func resetPeakRSS() { os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// columnNames returns the names of a store's columns.
func columnNames(b *testing.B, path string) []string {
	r, err := store.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	var names []string
	for _, f := range r.Schema().Fields() {
		names = append(names, f.Name)
	}
	return names
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

// copyStore is the copy job: read every batch of in and write it to out,
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

// BenchmarkTrainerSide times trainer-side advantage fns end to end against
// the pipeline-side GRPO on the same store in one run (200,000 × 256-token
// experiences by default; RFTPIPE_BENCH_TASKS × 8 rows otherwise): the
// ratios are the figures. The fns take turns for three rounds and each
// keeps its fastest time, so a burst of load on a shared machine does not
// land on one of them.
//
//	go test -run '^$' -bench BenchmarkTrainerSide -benchtime 1x ./pipeline
func BenchmarkTrainerSide(b *testing.B) {
	tasks := 25_000
	if s := os.Getenv("RFTPIPE_BENCH_TASKS"); s != "" {
		fmt.Sscan(s, &tasks)
	}
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(store.HeapLimit))
	in := benchStore(b, tasks)
	out := filepath.Join(b.TempDir(), "out.parquet")
	job := func(fn string) Job { return withFn(b, Job{In: in, Out: out}, fn, "") }
	if _, err := Run(context.Background(), job("grpo")); err != nil { // warm the page cache
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		times := map[string]float64{}
		for range 3 {
			for _, fn := range []string{"grpo", "rloo", "reinforceplusplus", "grpo_verl"} {
				debug.FreeOSMemory()
				start := time.Now()
				if _, err := Run(context.Background(), job(fn)); err != nil {
					b.Fatal(err)
				}
				if d := time.Since(start).Seconds(); times[fn] == 0 || d < times[fn] {
					times[fn] = d
				}
			}
		}
		b.ReportMetric(float64(tasks*8)/times["grpo"], "grpo_exp/s")
		for _, fn := range []string{"rloo", "reinforceplusplus", "grpo_verl"} {
			b.ReportMetric(times[fn]/times["grpo"], fn+"/grpo")
		}
	}
}
