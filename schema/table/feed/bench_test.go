package feed

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"

	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/schema/synth"
)

// BenchmarkIngest compares, on a Trinity-RFT 0.6 SQLite buffer of 20,000
// generated experiences, convert's copy of the buffer to Parquet with a
// full ingest of it, and times a nightly increment: the last 1 % of the
// rows, ingested into a table that holds the rest (rows-read/op counts
// what it read from the buffer).
//
//	go test -run '^$' -bench Ingest -benchtime 1x ./schema/table/feed/  (about 40 s)
func BenchmarkIngest(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	cfg := synth.Default()
	cfg.Tasks, cfg.Runs, cfg.TasksPerBatch, cfg.RespMin, cfg.RespMax = 2500, 8, 64, 64, 256
	total := cfg.Rows()
	inc := total / 100
	buffer := func(name string) string {
		return "sqlite:///" + filepath.Join(dir, name) + "?table=exp&schema_type=experience&layout=0.6&if_exists=append"
	}
	full, part := buffer("full.db"), buffer("part.db")
	var head, tail []arrow.Record // the first 99 % and the last 1 %
	var seen int64
	err := synth.Generate(ctx, cfg, func(rec arrow.Record) error {
		n := rec.NumRows()
		cut := min(max(total-inc-seen, 0), n)
		if cut > 0 {
			head = append(head, rec.NewSlice(0, cut))
		}
		if cut < n {
			tail = append(tail, rec.NewSlice(cut, n))
		}
		seen += n
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	write := func(url string, recs []arrow.Record) {
		w, err := store.Create(url, cfg.Schema())
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range recs {
			if err := w.Write(r); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	write(full, append(append([]arrow.Record{}, head...), tail...))
	write(part, head)
	template := filepath.Join(dir, "template")
	if res, err := Ingest(ctx, part, template, Options{Experiment: "e"}); err != nil || res.Rows != total-inc {
		b.Fatalf("template: %+v %v", res, err)
	}
	write(part, tail)

	b.Run("convert", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			r, err := store.Open(full)
			if err != nil {
				b.Fatal(err)
			}
			n, err := store.Copy(ctx, r, filepath.Join(dir, "convert.parquet"), nil)
			r.Close()
			if err != nil || n != total {
				b.Fatalf("convert: %d rows, %v", n, err)
			}
		}
		b.ReportMetric(float64(total)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("ingest-full", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			tbl := filepath.Join(b.TempDir(), "t")
			b.StartTimer()
			res, err := Ingest(ctx, full, tbl, Options{Experiment: "e"})
			if err != nil || res.Rows != total {
				b.Fatalf("ingest: %+v %v", res, err)
			}
		}
		b.ReportMetric(float64(total)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("ingest-1pct", func(b *testing.B) {
		var read int64
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			tbl := filepath.Join(b.TempDir(), "t")
			if out, err := exec.Command("cp", "-r", template, tbl).CombinedOutput(); err != nil {
				b.Fatalf("%v %s", err, out)
			}
			b.StartTimer()
			res, err := Ingest(ctx, part, tbl, Options{Experiment: "e"})
			if err != nil || res.Rows != inc {
				b.Fatalf("increment: %+v %v", res, err)
			}
			read += res.Read
		}
		b.ReportMetric(float64(read)/float64(b.N), "rows-read/op")
	})
}
