package feed

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/apache/arrow/go/v17/arrow"

	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/schema/table"
	"github.com/rftpipe/rftpipe/schema/table/catalog"
)

// DefaultTargetRows is the size under which compact merges data files.
const DefaultTargetRows = 1 << 20

// CompactResult says what a compaction did.
type CompactResult struct {
	Merged, Written int     // data files merged, and written in their place
	Snapshots       []int64 // one per run of files merged
	Expired         int     // data files removed by expiry
	// Warnings are the problems met after commits were made
	// (table.Table.Warnings), one line each.
	Warnings []string
}

// Compact rewrites each run of consecutive small data files of an
// experiment (table.SmallRuns) into one file, each run as one snapshot:
// readers see the small files or the merged one, never both and never
// neither, and the rows keep their order. With a non-zero expireBefore it
// then expires the snapshots older than it (table.Expire). Last, it writes
// the Iceberg metadata the table lacks (table.Table.SyncIceberg) and
// registers the table in cat (Register).
func Compact(ctx context.Context, dir string, targetRows int64, expireBefore time.Time, codec string, cat catalog.Target) (CompactResult, error) {
	var res CompactResult
	t, err := table.Open(dir, false)
	if err != nil {
		return res, err
	}
	runs, err := t.SmallRuns(targetRows)
	if err != nil {
		return res, err
	}
	for _, run := range runs {
		out, err := dataFile(t, run[0].Experiment)
		if err != nil {
			return res, err
		}
		df, err := merge(ctx, t, run, out, codec)
		if err != nil {
			return res, err
		}
		removed := make([]string, len(run))
		for i, f := range run {
			removed[i] = f.Path
		}
		snap, err := t.Replace(ctx, removed, []table.DataFile{df})
		if err != nil {
			os.Remove(out)
			return res, err
		}
		res.Merged += len(run)
		res.Written++
		res.Snapshots = append(res.Snapshots, snap)
	}
	if !expireBefore.IsZero() {
		gone, err := t.Expire(ctx, expireBefore)
		res.Expired = len(gone)
		if err != nil {
			return res, err
		}
	}
	t.SyncIceberg()
	res.Warnings = t.Warnings()
	return res, Register(ctx, t, cat)
}

// merge writes the rows of files, in order, atomically to out.
func merge(ctx context.Context, t *table.Table, files []table.DataFile, out, codec string) (df table.DataFile, err error) {
	df.Experiment = files[0].Experiment
	var w *store.Writer
	defer func() {
		if w != nil && err != nil {
			w.Abort()
		}
	}()
	for _, f := range files {
		r, err := store.Open(filepath.Join(t.Dir, filepath.FromSlash(f.Path)), store.Context(ctx))
		if err != nil {
			return df, err
		}
		if w == nil {
			sc := arrow.NewSchema(r.Schema().Fields(), nil)
			if w, err = store.Create(out, sc, store.WriteContext(ctx), store.WithParquet(store.ParquetOptions{Codec: codec})); err != nil {
				r.Close()
				return df, err
			}
		}
		for {
			rec, err := r.Next()
			if err == io.EOF {
				break
			}
			if err == nil {
				versionRange(rec, &df)
				df.Rows += rec.NumRows()
				err = w.Write(rec)
			}
			if err != nil {
				r.Close()
				return df, err
			}
		}
		r.Close()
	}
	if err = w.Commit(); err != nil {
		return df, err
	}
	w = nil
	df.Path, err = t.Rel(out)
	return df, err
}
