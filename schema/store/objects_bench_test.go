package store_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow/go/v17/arrow"

	"github.com/rftpipe/rftpipe/schema/objstore/objtest"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/schema/synth"
)

// BenchmarkReadObject reads a generated Parquet store (every column)
// from a local file and from an in-process S3 server (gofakes3, in
// memory), in turns, so that the load of the machine weighs on both
// alike: MB/s of the store's bytes from each, and the object's rate over
// the file's. The store has 6,000 tasks × 8 rows (80 MB) unless
// RFTPIPE_BENCH_TASKS says otherwise (58000: 770 MB).
//
//	go test -run '^$' -bench ReadObject -benchtime 5x -count 3 ./schema/store/
//	RFTPIPE_BENCH_TASKS=58000 go test -run '^$' -bench ReadObject -benchtime 3x -timeout 30m ./schema/store/
func BenchmarkReadObject(b *testing.B) {
	objtest.New(b)
	path := filepath.Join(b.TempDir(), "bench.parquet")
	cfg := synth.Default()
	cfg.Tasks, cfg.Runs, cfg.TasksPerBatch = 6000, 8, 64
	if s := os.Getenv("RFTPIPE_BENCH_TASKS"); s != "" {
		if _, err := fmt.Sscan(s, &cfg.Tasks); err != nil {
			b.Fatalf("RFTPIPE_BENCH_TASKS: %v", err)
		}
	}
	w, err := store.Create(path, cfg.Schema())
	if err != nil {
		b.Fatal(err)
	}
	if err := synth.Generate(context.Background(), cfg, w.Write); err != nil {
		b.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	url := objtest.URL("bench.parquet")
	if err := store.WriteFile(context.Background(), url, func(w io.Writer) error { _, err := w.Write(data); return err }); err != nil {
		b.Fatal(err)
	}
	size := float64(len(data))
	data = nil // the server holds its copy
	read := func(p string) time.Duration {
		start := time.Now()
		r, err := store.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		rows := int64(0)
		if err := r.ForEach(context.Background(), func(rec arrow.Record) error { rows += rec.NumRows(); return nil }); err != nil {
			b.Fatal(err)
		}
		r.Close()
		if rows != cfg.Rows() {
			b.Fatalf("read %d rows, want %d", rows, cfg.Rows())
		}
		return time.Since(start)
	}
	var file, object time.Duration
	for b.Loop() {
		file += read(path)
		object += read(url)
	}
	b.ReportMetric(size/1e6/file.Seconds()*float64(b.N), "file-MB/s")
	b.ReportMetric(size/1e6/object.Seconds()*float64(b.N), "object-MB/s")
	b.ReportMetric(file.Seconds()/object.Seconds(), "ratio")
}
