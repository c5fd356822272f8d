package store_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow/go/v17/arrow/array"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/schema/synth"
)

// BenchmarkReadParquet measures the streaming reader over a generated store of
// 200,000 experiences × 256 response tokens, reading every column.
//
//	go test -run '^$' -bench ReadParquet -count 6 ./schema/store/
func BenchmarkReadParquet(b *testing.B) {
	path := filepath.Join(b.TempDir(), "bench.parquet")
	cfg := synth.Default()
	cfg.Tasks, cfg.Runs, cfg.TasksPerBatch = 25000, 8, 64
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
	st, _ := os.Stat(path)
	b.ReportAllocs()
	b.ResetTimer()
	var tokens int64
	for i := 0; i < b.N; i++ {
		r, err := store.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		rows, toks := int64(0), int64(0)
		for {
			rec, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			rows += rec.NumRows()
			toks += int64(rec.Column(rec.Schema().FieldIndices(schema.Logprobs)[0]).(*array.List).ListValues().Len())
		}
		r.Close()
		if rows != cfg.Rows() {
			b.Fatalf("read %d rows, want %d", rows, cfg.Rows())
		}
		tokens = toks
	}
	sec := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(cfg.Rows())/sec, "rows/s")
	b.ReportMetric(float64(st.Size())/sec/1e6, "MB/s")
	b.ReportMetric(float64(tokens)/sec/1e6, "Mtok/s")
}
