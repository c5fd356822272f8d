package view

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/sql/duckdb"
)

// Source numbers in the index (rows.src).
const (
	srcStore    = 0
	srcRejected = 1
)

// index attaches the stores as the views experiences (and rejected),
// creates the table rows, empty, and builds the tables groups, steps,
// summary and reasons from the stores' scalar columns, reading no list and
// storing no row: the first pass, done before the viewer serves. fillRows
// is the second.
func (v *Viewer) index(ctx context.Context) error {
	paths := []string{v.o.Store}
	if v.o.Rejected != "" {
		paths = append(paths, v.o.Rejected)
	}
	// The Parquet footers are parsed once, not on every page that reads a
	// rollout.
	if _, err := v.db.ExecContext(ctx, "SET enable_object_cache = true"); err != nil {
		return err
	}
	if _, err := v.db.ExecContext(ctx, query("rows_create", nil)); err != nil {
		return err
	}
	var scans []string
	for i, p := range paths {
		files, warns, err := duckdb.ParquetFiles(ctx, duckdb.Store{Path: p}, fmt.Sprintf("source%d", i), v.tmp)
		if err != nil {
			return err
		}
		v.warns = append(v.warns, warns...)
		s := source{name: schema.Redact(p), path: p, files: files, cols: map[string]string{}}
		view := []string{duckdb.DefaultView, "rejected"}[i]
		if _, err := v.db.ExecContext(ctx, "CREATE VIEW "+view+" AS SELECT * FROM "+duckdb.ReadParquet(files)); err != nil {
			return badStore(p, err)
		}
		if i == srcStore {
			if v.tableStore, err = duckdb.AttachExperiments(ctx, v.db, p); err != nil {
				return err
			}
		}
		rows, err := v.db.QueryContext(ctx, "SELECT column_name, column_type FROM (DESCRIBE "+view+")")
		if err != nil {
			return badStore(p, err)
		}
		for rows.Next() {
			var name, typ string
			if err := rows.Scan(&name, &typ); err != nil {
				rows.Close()
				return err
			}
			s.cols[name] = typ
			s.order = append(s.order, name)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if err := v.countRows(ctx, &s); err != nil {
			return badStore(p, err)
		}
		scans = append(scans, "("+query("scan_select", s.scanExprs(i))+")")
		v.sources = append(v.sources, s)
	}
	scan := v.rowsRead("(" + strings.Join(scans, "\nUNION ALL\n") + ")")
	for _, q := range []string{"groups_create", "steps_create", "summary_create", "reasons_create"} {
		if _, err := v.db.ExecContext(ctx, query(q, scan)); err != nil {
			return badStore(v.o.Store, duckdb.Located(ctx, err, paths...))
		}
	}
	return v.indexExperiments(ctx)
}

// indexExperiments reads the experiments of the index and, when there are
// several, the table the overview shows of them: the view experiments of
// an experience table (its config key fields, first and last
// model_version, rows), else each one's first and last explore step and
// rows from the index.
func (v *Viewer) indexExperiments(ctx context.Context) error {
	rows, err := v.db.QueryContext(ctx, "SELECT DISTINCT experiment FROM steps ORDER BY experiment")
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var e string
		if err := rows.Scan(&e); err != nil {
			return err
		}
		v.experiments = append(v.experiments, e)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(v.experiments) < 2 {
		return nil
	}
	q := query("experiments", nil)
	if v.tableStore {
		q = "SELECT * FROM " + duckdb.ExperimentsView
	}
	if v.expTable, err = v.table(ctx, q, -1); err != nil {
		return badStore(v.o.Store, duckdb.Located(ctx, err, v.o.Store))
	}
	return nil
}

// countRows sets the source's row counts per file from the files' footers
// and the ids of their first rows, which follow the previous sources'.
func (v *Viewer) countRows(ctx context.Context, s *source) error {
	quoted := make([]string, len(s.files))
	for k, f := range s.files {
		quoted[k] = duckdb.QuoteString(f)
	}
	rows, err := v.db.QueryContext(ctx, "SELECT file_name, num_rows FROM parquet_file_metadata(["+strings.Join(quoted, ", ")+"])")
	if err != nil {
		return err
	}
	defer rows.Close()
	n := map[string]int64{}
	for rows.Next() {
		var f string
		var r int64
		if err := rows.Scan(&f, &r); err != nil {
			return err
		}
		n[f] = r
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, f := range s.files {
		r, ok := n[f]
		if !ok {
			return fmt.Errorf("view: no row count for %s in its footer", f)
		}
		s.first, s.rows = append(s.first, v.n), append(s.rows, r)
		v.n += r
	}
	return nil
}

// secondPass is the state of the index's second pass (fillRows), which fills
// the index rows, with the advantage and response length the per-token
// lists give, while the viewer serves.
type secondPass struct {
	done   chan struct{} // closed when the pass has ended
	err    error         // why it failed (bad input naming the store); read after done
	filled atomic.Int64  // rows filled so far
	cancel context.CancelFunc
}

// startRows starts the second pass in the background; Close stops it.
func (v *Viewer) startRows() {
	ctx, cancel := context.WithCancel(context.Background())
	v.pass = &secondPass{done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(v.pass.done)
		if v.o.hold != nil {
			select {
			case <-v.o.hold:
			case <-ctx.Done():
				v.pass.err = ctx.Err()
				return
			}
		}
		if v.pass.err = v.fillRows(ctx); v.pass.err != nil && ctx.Err() == nil && v.o.Log != nil {
			v.o.Log.Printf("view: %v", v.pass.err)
		}
	}()
}

// fillRows is the index's second pass: on a connection of its own, while
// the pages use the other, it fills the index rows file by file
// (rows_insert.sql), then builds groups, steps and summary again from them
// (now with advantages and lengths), in one transaction.
func (v *Viewer) fillRows(ctx context.Context) error {
	conn, err := v.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	for i, s := range v.sources {
		e := s.rowExprs(i, true)
		for k := range s.files {
			e["file"], e["source"] = fmt.Sprint(k), s.readFile(k)
			res, err := conn.ExecContext(ctx, query("rows_insert", map[string]string{"select": query("rows_select", e)}))
			if err != nil {
				return badStore(s.path, duckdb.Located(ctx, err, s.path))
			}
			// The ids of the pages' links are the row counts' of the footers.
			if n, err := res.RowsAffected(); err != nil || n != s.rows[k] {
				return fmt.Errorf("view: %s: %d rows read, its footer says %d (%v)", s.files[k], n, s.rows[k], err)
			}
			v.pass.filled.Add(s.rows[k])
		}
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, q := range []string{"groups_create", "steps_create", "summary_create"} {
		if _, err := tx.ExecContext(ctx, query(q, v.rowsRead("rows"))); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// indexing says, while the second pass runs or when it failed, what the
// pages lack; "" once it is done.
func (v *Viewer) indexing() string {
	select {
	case <-v.pass.done:
		if v.pass.err != nil {
			return fmt.Sprintf("The rollouts could not be indexed: %v", v.pass.err)
		}
		return ""
	default:
		return fmt.Sprintf("Indexing the rollouts: %d of %d; until done, advantage and response length show – and a group, a rollout, a search wait for it.", v.pass.filled.Load(), v.n)
	}
}

// Wait waits until the index's second pass is done (the rollouts indexed,
// advantage and response length shown) and returns its error, or ctx's.
func (v *Viewer) Wait(ctx context.Context) error {
	select {
	case <-v.pass.done:
		return v.pass.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// rowExprs fills rows_select.sql for source i: the expression of each
// index column over the columns the source has (a typed NULL for those it
// lacks), advantage, entropy and response_length NULL unless withLists.
func (s source) rowExprs(i int, withLists bool) map[string]string {
	// col is the column name as it is (cast "") or cast to typ.
	col := func(name, typ, cast string) string {
		if !s.has(name) {
			return "NULL::" + typ
		}
		return duckdb.QuoteIdent(name) + cast
	}
	e := map[string]string{
		"src":             fmt.Sprint(i),
		"experiment":      col(schema.Experiment, "VARCHAR", "::VARCHAR"),
		"batch":           col(schema.Batch, "VARCHAR", ""),
		"task":            col(schema.Task, "VARCHAR", ""),
		"run":             col(schema.Run, "BIGINT", "::BIGINT"),
		"step":            col(schema.Step, "BIGINT", "::BIGINT"),
		"reward":          col(schema.Reward, "DOUBLE", "::DOUBLE"),
		"drop_reason":     col(schema.DropReason, "VARCHAR", ""),
		"dropped_by":      col(schema.DroppedBy, "VARCHAR", ""),
		"advantage":       "NULL::DOUBLE",
		"entropy":         "NULL::DOUBLE",
		"response_length": "NULL::BIGINT",
	}
	if !withLists {
		return e
	}
	switch {
	case s.has(schema.ActionMask):
		e["response_length"] = "len(action_mask)"
	case s.has(schema.Logprobs):
		e["response_length"] = "len(logprobs)"
	case s.has(schema.Tokens, schema.PromptLength):
		e["response_length"] = "len(tokens) - prompt_length"
	case s.has(schema.Chosen):
		e["response_length"] = "len(chosen)"
	}
	// The means over the action-mask tokens, as the report's advantage.
	for name, list := range map[string]string{"advantage": schema.Advantages, "entropy": schema.Entropy} {
		switch {
		case s.has(list, schema.ActionMask):
			e[name] = query("masked_mean", map[string]string{"list": list})
		case s.has(list):
			e[name] = "list_avg(" + list + ")"
		}
	}
	return e
}

// rowsRead fills the placeholders of the queries building groups, steps,
// summary and reasons: rows, the rows they read, and drops, those of them
// that can be dropped: none when no store has drop_reason or dropped_by.
func (v *Viewer) rowsRead(rows string) map[string]string {
	for _, s := range v.sources {
		if s.has(schema.DropReason) || s.has(schema.DroppedBy) {
			return map[string]string{"rows": rows, "drops": rows}
		}
	}
	return map[string]string{"rows": rows, "drops": "(SELECT NULL::VARCHAR AS experiment, NULL::VARCHAR AS batch, NULL::VARCHAR AS task, NULL::VARCHAR AS drop_reason, NULL::VARCHAR AS dropped_by LIMIT 0)"}
}

// scanExprs fills scan_select.sql for source i: as rowExprs without the
// lists, over all its files, a text id coalesced to the empty string (a number id stays
// a number; groups_create.sql and steps_create.sql make it text per group).
func (s source) scanExprs(i int) map[string]string {
	e := s.rowExprs(i, false)
	for name, c := range map[string]string{"experiment": schema.Experiment, "batch": schema.Batch, "task": schema.Task} {
		if s.cols[c] == "VARCHAR" {
			e[name] = "coalesce(" + e[name] + ", '')"
		}
	}
	e["source"] = duckdb.ReadParquet(s.files)
	return e
}

// readFile is the read_parquet call over the source's file k with each
// row's row number (column file_row_number).
func (s source) readFile(k int) string {
	return duckdb.ReadParquet(s.files[k:k+1], "file_row_number = true")
}

// tokenColumns returns the source's per-token list columns a rollout's
// tokens can be coloured by: numeric or boolean lists other than the token
// ids themselves.
func (s source) tokenColumns() []string {
	var out []string
	for _, c := range s.order {
		t := s.cols[c]
		if !strings.HasSuffix(t, "[]") || strings.Count(t, "[]") > 1 {
			continue
		}
		switch c {
		case schema.Tokens, schema.Chosen, schema.Rejected:
			continue
		}
		switch strings.TrimSuffix(t, "[]") {
		case "FLOAT", "DOUBLE", "BOOLEAN", "INTEGER", "BIGINT", "SMALLINT", "TINYINT":
			out = append(out, c)
		}
	}
	return out
}

// textColumn returns the source's column holding a rollout's response as
// text (Trinity's response_text, else its messages), or "".
func (s source) textColumn() string {
	for _, c := range []string{"response_text", "messages"} {
		if s.cols[c] == "VARCHAR" {
			return c
		}
	}
	return ""
}
