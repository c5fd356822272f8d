package pipeline

import (
	"context"
	dbsql "database/sql"
	"strconv"
	"strings"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/rftpipe/rftpipe/pipeline/shard"
	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/sql/duckdb"
)

// A sharded job (Job.Shard) reads only the rows of its shard's batches:
// the group pass restricts DuckDB's view of the store to them (a WHERE on
// the batch ids, which DuckDB pushes down to its Parquet scan), the Go
// reader skips the row groups whose batch statistics hold none of them,
// and every record read is cut to the shard's rows before the stages see
// it. Row numbers the stages see (Batch.Row) count the shard's rows; errors
// still name the row's file and its row in that file.

// checkShardable refuses a sharded job with a stage that needs the rows of
// more than one batch.
func checkShardable(job *Job) error {
	if job.Shard == nil {
		return nil
	}
	for _, st := range job.Stages {
		if why := st.Needs().CrossBatch; why != "" {
			return schema.BadInputf("%s cannot be sharded: %s; run it without --shards", st.Name(), why)
		}
	}
	return nil
}

// readOptions are the options of every Go read of the job's store.
func (j *Job) readOptions(opts ...store.ReadOption) []store.ReadOption {
	opts = append(opts, store.BatchRows(j.BatchRows))
	if j.Shard != nil {
		opts = append(opts, store.SkipRowGroups(schema.Batch, mayHold(*j.Shard)))
	}
	return opts
}

// maxEnumerated is the widest integer range of a row group whose batch ids
// are checked one by one; a wider one is read.
const maxEnumerated = 1 << 16

// mayHold returns whether a row group whose batch ids span r may hold a
// batch of shard s.
func mayHold(s shard.Shard) func(store.Range) bool {
	return func(r store.Range) bool {
		switch {
		case r.Int && r.MaxInt-r.MinInt < maxEnumerated:
			for v := r.MinInt; v <= r.MaxInt; v++ {
				if s.HoldsInt(v) {
					return true
				}
			}
			return false
		case !r.Int && string(r.Min) == string(r.Max):
			return s.Holds(r.Min)
		}
		return true
	}
}

// batcher makes the Batches of one pass from the reader's records: each
// record whole, or the rows of the job's shard.
type batcher struct {
	cols     *columns
	sh       *shard.Shard
	batchCol int
	rows     int64 // rows handed out so far
	idx      []int64
}

func newBatcher(job *Job, cols *columns, sc *arrow.Schema) *batcher {
	return &batcher{cols: cols, sh: job.Shard, batchCol: fieldIndex(sc, schema.Batch)}
}

// batch returns the Batch of rec, whose first row is fileRow of file, and
// of rest, the columns of a deferred read left undecoded (nil: none); nil
// when the shard holds none of its rows. The Batch's record and rest are
// the caller's to release; batch releases rest itself when it returns nil
// or cuts the shard's rows out (decoding rest). The rows of a sharded job
// are validated here, all of them, so that an error names its row in the
// file.
func (bt *batcher) batch(rec arrow.Record, rest *store.Rest, file string, fileRow int64) (b *Batch, err error) {
	defer func() {
		if b == nil && rest != nil {
			rest.Release() // the input file's reference
		}
	}()
	b = &Batch{cols: bt.cols, File: file, FileRow: fileRow, Row: bt.rows, mem: memory.DefaultAllocator}
	if bt.sh == nil {
		rec.Retain()
		b.rec, b.rest = rec, rest
		bt.rows += rec.NumRows()
		return b, nil
	}
	if err := schema.Validate(file, fileRow, rec, schema.ValidateOptions{AllowInvalidReward: true}); err != nil {
		return nil, err
	}
	if bt.batchCol < 0 {
		return nil, schema.Errorf(file, -1, schema.Batch, "a sharded job needs the batch column")
	}
	bt.idx = bt.sh.Rows(rec.Column(bt.batchCol), bt.idx[:0])
	if len(bt.idx) == 0 {
		return nil, nil
	}
	b.fileRows = make([]int64, len(bt.idx))
	for k, i := range bt.idx {
		b.fileRows[k] = fileRow + i
	}
	if len(bt.idx) == int(rec.NumRows()) {
		rec.Retain()
		b.rec, b.rest = rec, rest
	} else {
		// Rows of other shards go: a deferred read's other columns are
		// decoded and appended, and the rows taken from them all.
		whole := rec
		if rest != nil {
			if whole, err = rest.Join(rec); err != nil {
				return nil, err
			}
			defer whole.Release()
			rest.Release()
			rest = nil
		}
		if b.rec, err = takeRows(whole, bt.idx); err != nil {
			return nil, err
		}
	}
	bt.rows += int64(len(bt.idx))
	return b, nil
}

// restrictExps narrows the group pass's view exps to the rows of shard s:
// the distinct batch ids of the store (one scan of the batch column) are
// mapped to their shards, and the view keeps the rows of this one's.
func restrictExps(ctx context.Context, db *dbsql.DB, s shard.Shard) error {
	var keys []string
	isInt := true
	err := query(ctx, db, "SELECT DISTINCT CAST(batch AS VARCHAR), typeof(batch) FROM exps WHERE batch IS NOT NULL", func(rows *dbsql.Rows) error {
		var key, typ string
		if err := rows.Scan(&key, &typ); err != nil {
			return err
		}
		if s.Holds([]byte(key)) {
			keys = append(keys, key)
		}
		isInt = isInt && strings.Contains(strings.ToUpper(typ), "INT")
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range keys {
		if _, err := strconv.ParseInt(k, 10, 64); err != nil {
			isInt = false
		}
	}
	pred := "FALSE"
	if len(keys) > 0 {
		col, lits := "batch", keys
		if !isInt {
			col, lits = "CAST(batch AS VARCHAR)", make([]string, len(keys))
			for i, k := range keys {
				lits[i] = duckdb.QuoteString(k)
			}
		}
		pred = col + " IN (" + strings.Join(lits, ", ") + ")"
	}
	for _, q := range []string{"ALTER VIEW exps RENAME TO exps_store",
		"CREATE TEMP VIEW exps AS SELECT * FROM exps_store WHERE " + pred} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return groupError(err)
		}
	}
	return nil
}
