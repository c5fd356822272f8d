package store_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"

	"github.com/rftpipe/rftpipe/schema/objstore/objtest"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/schema/synth"
)

// BenchmarkReadObject reads a generated Parquet store (every column) from
// a local file and from an in-process S3 server (gofakes3, in memory):
// MB/s of the store's bytes, the object's rate over the file's being the
// ratio to compare.
//
//	go test -run '^$' -bench ReadObject -benchtime 3x -count 3 ./schema/store/
func BenchmarkReadObject(b *testing.B) {
	objtest.New(b)
	path := filepath.Join(b.TempDir(), "bench.parquet")
	cfg := synth.Default()
	cfg.Tasks, cfg.Runs, cfg.TasksPerBatch = 6000, 8, 64
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
	if err := store.WriteFile(url, func(w io.Writer) error { _, err := w.Write(data); return err }); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ name, path string }{{"file", path}, {"object", url}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r, err := store.Open(c.path)
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
			}
			b.ReportMetric(float64(len(data))/1e6*float64(b.N)/b.Elapsed().Seconds(), "MB/s")
		})
	}
}
