package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/rftpipe/rftpipe/pipeline/shard"
	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/schema/synth"
)

// shardRead reads the whole store at path as the streaming pass of shard
// sh (nil: every row) reads it: it returns the Parquet bytes read, the rows
// of the row groups read and skipped, and the rows of the shard among them.
func shardRead(t *testing.T, path string, sh *shard.Shard) (bytes, read, skipped, held int64) {
	t.Helper()
	job := &Job{BatchRows: DefaultBatchRows, Shard: sh}
	r, err := store.Open(path, job.readOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var idx []int64
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		read += rec.NumRows()
		if sh != nil {
			idx = sh.Rows(rec.Column(fieldIndex(rec.Schema(), schema.Batch)), idx[:0])
			held += int64(len(idx))
		}
	}
	return r.BytesRead(), read, r.Skipped(), held
}

// TestShardReadsItsRowGroups: on a batch-ordered store of 1M rows in 64
// batches, as gen writes it (row groups of up to 8192 rows, none holding
// two batches), each of 8 shards reads only the row groups of its batches —
// at most 20% of the bytes of a whole read — skips the others (every row
// accounted for, read or skipped) and finds all of its rows.
func TestShardReadsItsRowGroups(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: writes a 1M-row store")
	}
	path := filepath.Join(t.TempDir(), "s.parquet")
	cfg := synth.Default()
	cfg.Tasks, cfg.Runs, cfg.TasksPerBatch = 125000, 8, 1954 // 64 batches, 1M rows
	cfg.PromptLen, cfg.RespMin, cfg.RespMax = 8, 8, 24
	w, err := store.Create(path, cfg.Schema())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if err := synth.Generate(context.Background(), cfg, func(rec arrow.Record) error { return w.Write(rec) }); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	whole, rows, _, _ := shardRead(t, path, nil)
	if rows != 1_000_000 {
		t.Fatalf("%d rows", rows)
	}
	var held int64
	for i := 0; i < 8; i++ {
		sh := shard.Shard{N: 8, I: i}
		bytes, read, skipped, h := shardRead(t, path, &sh)
		frac := float64(bytes) / float64(whole)
		t.Logf("shard %d/8: %d of %d rows (%.1f%%) in the row groups read, %.1f%% of the bytes", i, h, read, 100*float64(h)/float64(rows), 100*frac)
		if read+skipped != rows {
			t.Errorf("shard %d: %d read + %d skipped of %d rows", i, read, skipped, rows)
		}
		if frac > 0.20 {
			t.Errorf("shard %d read %.1f%% of the bytes", i, 100*frac)
		}
		held += h
	}
	if held != rows {
		t.Errorf("the shards hold %d of %d rows", held, rows)
	}
}

// rowStrings returns every row of a store rendered as text, sorted.
func rowStrings(t *testing.T, path string) []string {
	t.Helper()
	r, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var rows []string
	err = r.ForEach(context.Background(), func(rec arrow.Record) error {
		for i := 0; i < int(rec.NumRows()); i++ {
			var sb strings.Builder
			for c, col := range rec.Columns() {
				fmt.Fprintf(&sb, "%s=%s;", rec.ColumnName(c), col.ValueStr(i))
			}
			rows = append(rows, sb.String())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(rows)
	return rows
}

// TestShardCutsRowGroups: on a store whose one row group holds all 16
// batches, each of 3 shards cuts its rows out of the row group — the
// columns its deferred read left undecoded are decoded for it — and the
// shards' rows together are the single run's, every column.
func TestShardCutsRowGroups(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.parquet")
	cfg := synth.Default()
	cfg.Tasks, cfg.Runs, cfg.TasksPerBatch, cfg.RespMin, cfg.RespMax = 48, 4, 3, 8, 24
	var recs []arrow.Record
	err := synth.Generate(context.Background(), cfg, func(rec arrow.Record) error {
		rec.Retain()
		recs = append(recs, rec)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cols := make([]arrow.Array, len(recs[0].Columns()))
	for c := range cols {
		parts := make([]arrow.Array, len(recs))
		for i, rec := range recs {
			parts[i] = rec.Column(c)
		}
		if cols[c], err = array.Concatenate(parts, memory.DefaultAllocator); err != nil {
			t.Fatal(err)
		}
	}
	whole := array.NewRecord(recs[0].Schema(), cols, int64(cfg.Rows()))
	w, err := store.Create(in, whole.Schema())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(whole); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	single := filepath.Join(dir, "single.parquet")
	run(t, withFn(t, Job{In: in, Out: single}, "grpo", ""))
	var got []string
	for i := 0; i < 3; i++ {
		out := filepath.Join(dir, fmt.Sprintf("part-%d.parquet", i))
		run(t, withFn(t, Job{In: in, Out: out, Shard: &shard.Shard{N: 3, I: i}}, "grpo", ""))
		got = append(got, rowStrings(t, out)...)
	}
	slices.Sort(got)
	if want := rowStrings(t, single); !slices.Equal(got, want) {
		t.Fatalf("the shards' %d rows differ from the single run's %d", len(got), len(want))
	}
}
