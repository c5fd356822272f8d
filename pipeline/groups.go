package pipeline

import (
	"context"
	dbsql "database/sql"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/rftpipe/rftpipe/pipeline/shard"
	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	rsql "github.com/rftpipe/rftpipe/sql"
	"github.com/rftpipe/rftpipe/sql/duckdb"
	"github.com/rftpipe/rftpipe/stages/advantage"
)

// groupColumns lists the store columns the group pass reads for n, besides
// the experiment (experimentKey).
func groupColumns(n GroupNeeds) []string {
	cols := []string{schema.Batch, schema.Task, schema.Reward}
	if n.Runs || n.Step {
		cols = append(cols, schema.Run, schema.Step)
	}
	if n.LogprobMean {
		cols = append(cols, schema.Logprobs)
	}
	if (n.StepReward != "" || n.Anchor != "" || n.CoD) && !n.NoInfo {
		cols = append(cols, schema.Info)
	}
	if n.CoD {
		cols = append(cols, schema.ActionMask)
		if !n.Runs && !n.Step {
			cols = append(cols, schema.Run)
		}
	}
	if on := n.Operator; on.Metrics != nil && !on.NoMetrics {
		cols = append(cols, schema.Metrics)
	}
	if n.Operator.Truncated && !n.Operator.NoTruncateStatus {
		cols = append(cols, schema.TruncateStatus)
	}
	if n.Operator.ResponseLength && !n.CoD {
		cols = append(cols, schema.ActionMask)
	}
	if n.Operator.ReturnsNorm && !n.NoInfo && !slices.Contains(cols, schema.Info) {
		cols = append(cols, schema.Info)
	}
	if n.Operator.ModelVersion {
		cols = append(cols, schema.ModelVersion)
	}
	return append(cols, n.ComponentColumns...)
}

// Grouping is the result of the group pass: per-row scalars and groupings
// of the rows it keeps (Input, the shape a pipeline-side fn reads), and how
// store rows map onto them.
type Grouping struct {
	Input *advantage.Input
	// planRow maps a store row to its row in Input, -1 for a row dropped for
	// an invalid reward; nil when every row is in Input (the identity).
	planRow []int32
	// Rows is the number of store rows; Invalid the number with a null, NaN
	// or infinite reward, the first of which is store row FirstInvalid (-1).
	Rows, Invalid, FirstInvalid int64
	// ops are the experience operators' per-row scalars (nil: none read).
	ops *opScalars
}

// Row returns the Input row of store row i, -1 if the pass dropped it.
func (g *Grouping) Row(i int64) int32 {
	if g.planRow == nil {
		return int32(i)
	}
	return g.planRow[i]
}

// groupPass runs the DuckDB queries of sql/pipeline over the store's files
// and builds the fn's Input. Files that are not Parquet are first reduced to
// a temporary Parquet file of the scalar columns needed, in tmpDir.
// With n.InvalidRewards, rows with an invalid reward are grouped like the
// others (their reward is NaN or ±Inf); otherwise they belong to no group.
// With a shard, only the rows of its batches are grouped.
// The group pass reads the columns of n by the names of cols, the
// store's columns (an alias such as response_mask, the job's Columns
// mapping), under rftpipe's names.
func groupPass(ctx context.Context, in string, files []string, n GroupNeeds, cols *columns, sh *shard.Shard, tmpDir string) (*Grouping, error) {
	g, err := duckGroups(ctx, in, files, n, cols, sh, tmpDir)
	// DuckDB fails on a damaged store in words of its own; the store reader
	// names the file, row group and column.
	return g, duckdb.Located(ctx, err, in)
}

// duckGroups is the group pass, in DuckDB.
func duckGroups(ctx context.Context, in string, files []string, n GroupNeeds, cols *columns, sh *shard.Shard, tmpDir string) (*Grouping, error) {
	stored, sel := cols.selectAs(groupColumns(n))
	exp, key := experimentKey(cols)
	files, err := parquetFiles(ctx, in, files, append(stored, exp...), tmpDir)
	if err != nil {
		return nil, err
	}
	// DuckDB's hash tables and sort spill to tmpDir past the limit, so the
	// pass stays flat in memory whatever the store's size.
	db, err := duckdb.Open(duckdb.Options{TempDir: tmpDir, MemoryLimit: "512MB"})
	if err != nil {
		return nil, err
	}
	defer func() {
		db.Close()
		duckdb.Trim() // the streaming pass must not stack on DuckDB's peak
	}()
	if err := createExps(ctx, db, files, sel+", "+key); err != nil {
		return nil, err
	}
	if sh != nil {
		if err := restrictExps(ctx, db, *sh); err != nil {
			return nil, err
		}
	}

	g := &Grouping{Input: &advantage.Input{}, FirstInvalid: -1}
	grouped := "valid"
	if n.InvalidRewards {
		grouped = "TRUE"
	}
	vars := map[string]string{"grouped": grouped}
	tid, err := scanTasks(ctx, db, g, vars)
	if err != nil {
		return nil, err
	}
	if g.Input.Tasks, err = groupsOf(tid); err != nil {
		return nil, err
	}
	if n.Runs || n.Step {
		var first []int64
		if err := duckdb.QueryColumns(ctx, db, rsql.Pipeline("null_ids", nil), &first); err != nil {
			return nil, groupError(err)
		}
		if first[0] >= 0 {
			return nil, locateRow(in, first[0], schema.ValidateOptions{AllowInvalidReward: true}, func(file string, row int64) error {
				return schema.Errorf(file, row, "", "null id (batch, task, run or step)")
			})
		}
		if err := scanRuns(ctx, db, g, n.Step, vars); err != nil {
			return nil, err
		}
	}
	if n.LogprobMean {
		q := make([]float64, 0, len(g.Input.Reward))
		if err := duckdb.QueryColumns(ctx, db, rsql.Pipeline("logprob_mean", vars), &q); err != nil {
			return nil, groupError(err)
		}
		g.Input.LogprobMean = q
	}
	if err := scanInfo(ctx, db, g, n, vars); err != nil {
		return nil, err
	}
	if n.Operators {
		if err := scanOperators(ctx, db, g, n, vars); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// experimentKey returns the store column the group pass reads for the
// experiment (none when the store lacks it) and the select item of
// exps.experiment (exps.sql), the key column that keeps every group of the
// pass within one experiment: the store's experiment as text (a table's
// Hive partition), the empty string for a null or for a store without the
// column, whose groups are then those of the ids alone.
func experimentKey(cols *columns) (stored []string, item string) {
	e := duckdb.QuoteIdent(schema.Experiment)
	if !cols.has(schema.Experiment) {
		return nil, "'' AS " + e
	}
	name := cols.name(schema.Experiment)
	return []string{name}, "coalesce(CAST(" + duckdb.QuoteIdent(name) + " AS VARCHAR), '') AS " + e
}

// createExps creates the view exps over files (exps.sql): the union of every
// file's rows (file.sql), each file's row_idx offset by the rows before it.
// The files agree on their columns (Run checks them first).
func createExps(ctx context.Context, db *dbsql.DB, files []string, sel string) error {
	quoted := make([]string, len(files))
	for i, f := range files {
		quoted[i] = duckdb.QuoteString(f)
	}
	count := map[string]int64{}
	err := query(ctx, db, rsql.Pipeline("file_rows", map[string]string{"files": "[" + strings.Join(quoted, ", ") + "]"}),
		func(rows *dbsql.Rows) error {
			var name string
			var n int64
			if err := rows.Scan(&name, &n); err != nil {
				return err
			}
			count[name] = n
			return nil
		})
	if err != nil {
		return err
	}
	parts := make([]string, len(files))
	offset := int64(0)
	for i, f := range files {
		parts[i] = rsql.Pipeline("file", map[string]string{"file": quoted[i], "offset": strconv.FormatInt(offset, 10), "columns": sel})
		offset += count[f]
	}
	if _, err := db.ExecContext(ctx, rsql.Pipeline("exps", map[string]string{"files": strings.Join(parts, "UNION ALL\n")})); err != nil {
		return fmt.Errorf("group pass: %w", err)
	}
	return nil
}

// scanTasks reads tasks.sql into g's rewards and planRow; it returns the task
// group id of every kept row.
func scanTasks(ctx context.Context, db *dbsql.DB, g *Grouping, vars map[string]string) ([]int32, error) {
	var rowIdx, ids []int64
	var rewards []float64
	if err := duckdb.QueryColumns(ctx, db, rsql.Pipeline("tasks", vars), &rowIdx, &rewards, &ids); err != nil {
		return nil, groupError(err)
	}
	tid := make([]int32, 0, len(ids))
	g.Input.Reward = slices.Grow(g.Input.Reward, len(ids))
	for i, id := range ids {
		if v := rewards[i]; math.IsNaN(v) || math.IsInf(v, 0) {
			if g.Invalid == 0 {
				g.FirstInvalid = rowIdx[i]
			}
			g.Invalid++
		}
		if id < 0 { // invalid reward, dropped
			if g.planRow == nil {
				g.planRow = make([]int32, g.Rows, g.Rows+1)
				for i := range g.planRow {
					g.planRow[i] = int32(i)
				}
			}
			g.planRow = append(g.planRow, -1)
		} else {
			if g.planRow != nil {
				g.planRow = append(g.planRow, int32(len(tid)))
			}
			tid = append(tid, int32(id))
			g.Input.Reward = append(g.Input.Reward, rewards[i])
		}
		g.Rows++
	}
	return tid, nil
}

// scanRuns reads runs.sql into g's run grouping (and steps).
func scanRuns(ctx context.Context, db *dbsql.DB, g *Grouping, withStep bool, vars map[string]string) error {
	var ids, steps []int64
	if err := duckdb.QueryColumns(ctx, db, rsql.Pipeline("runs", vars), &ids, &steps); err != nil {
		return groupError(err)
	}
	rid := make([]int32, len(ids))
	for i, id := range ids {
		rid[i] = int32(id)
	}
	runs, err := groupsOf(rid)
	if err != nil {
		return err
	}
	g.Input.Runs = runs
	if withStep {
		g.Input.Step = steps
	}
	return nil
}

// groupsOf builds the grouping of dense first-appearance ids.
func groupsOf(ids []int32) (advantage.Groups, error) {
	n := int32(-1)
	for _, id := range ids {
		n = max(n, id)
	}
	g, err := advantage.GroupByIDs(ids, int(n+1))
	if err != nil {
		return g, fmt.Errorf("group pass: %w", err) // DuckDB numbered groups out of order: a bug
	}
	return g, nil
}

// query runs q and calls scan for every row. DuckDB's errors reading the
// store's files (a cut or corrupt file) are bad input, like the readers'.
func query(ctx context.Context, db *dbsql.DB, q string, scan func(*dbsql.Rows) error) error {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return groupError(err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return groupError(err)
		}
	}
	if err := rows.Err(); err != nil {
		return groupError(err)
	}
	return nil
}

// groupError wraps an error of the group pass; DuckDB failing on a file's
// bytes (duckdb.ReadFailure: it read a damaged file) is bad input.
func groupError(err error) error {
	if duckdb.ReadFailure(err) {
		return &schema.InputError{Row: -1, Msg: "group pass: corrupt or unreadable store", Err: err}
	}
	return fmt.Errorf("group pass: %w", err)
}

func nullNaN(v dbsql.NullFloat64) float64 {
	if !v.Valid {
		return math.NaN()
	}
	return v.Float64
}

// parquetFiles returns the files of store in if DuckDB reads them in place
// (store.ReadInPlace); otherwise it copies the named columns of the store,
// as the store reader gives them, in order, into one temporary Parquet file
// in dir and returns that.
func parquetFiles(ctx context.Context, in string, files, cols []string, dir string) ([]string, error) {
	if ok, err := store.ReadInPlace(in, files); err != nil || ok {
		return files, err
	}
	r, err := store.Open(in, store.Columns(cols...))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	tmp := filepath.Join(dir, "scalars.parquet")
	if _, err := store.Copy(ctx, r, tmp, nil, store.WithParquet(store.ParquetOptions{Codec: "none"})); err != nil {
		return nil, err
	}
	return []string{tmp}, nil
}

// locateRow returns the error of the store's row storeRow, which the
// group pass found invalid (it knows the store row; the reader knows the
// file and the row within it): Validate's with opt, from that row on, else
// fallback's for the row's file and row in it.
func locateRow(in string, storeRow int64, opt schema.ValidateOptions, fallback func(file string, row int64) error) error {
	// All columns: the row DuckDB counted may be invalid for another
	// reason than the one it was found by (a null id), which Validate must
	// see.
	r, err := store.Open(in)
	if err != nil {
		return err
	}
	defer r.Close()
	for {
		rec, err := r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return fallback(in, storeRow)
			}
			return err
		}
		file, fileRow, first := r.Pos()
		if k := storeRow - first; k < rec.NumRows() {
			tail := rec.NewSlice(k, rec.NumRows())
			defer tail.Release()
			if err := schema.Validate(file, fileRow+k, tail, opt); err != nil {
				return err
			}
			return fallback(file, fileRow+k)
		}
	}
}
