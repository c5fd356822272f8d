package view

import (
	"context"
	"fmt"
	"strings"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/sql/duckdb"
)

// Source numbers in the index (rows.src).
const (
	srcStore    = 0
	srcRejected = 1
)

// index attaches the stores as the views experiences (and rejected), and
// builds the temp tables rows, groups, steps, summary and reasons.
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
	for i, p := range paths {
		files, warns, err := duckdb.ParquetFiles(ctx, duckdb.Store{Path: p}, fmt.Sprintf("source%d", i), v.tmp)
		if err != nil {
			return err
		}
		v.warns = append(v.warns, warns...)
		s := source{name: schema.Redact(p), files: files, cols: map[string]string{}}
		view := []string{duckdb.DefaultView, "rejected"}[i]
		if _, err := v.db.ExecContext(ctx, "CREATE VIEW "+view+" AS SELECT * FROM "+duckdb.ReadParquet(files)); err != nil {
			return badStore(p, err)
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
		if _, err := v.db.ExecContext(ctx, query("rows_insert", s.rowExprs(i))); err != nil {
			return badStore(p, duckdb.Located(ctx, err, p))
		}
		v.sources = append(v.sources, s)
	}
	for _, q := range []string{"groups_create", "steps_create", "summary_create", "reasons_create"} {
		if _, err := v.db.ExecContext(ctx, query(q, nil)); err != nil {
			return err
		}
	}
	return v.db.QueryRowContext(ctx, "SELECT count(*) FROM rows").Scan(&v.n)
}

// rowExprs fills rows_insert.sql for source i: the expression of each index
// column over the columns the source has (NULL for those it lacks).
func (s source) rowExprs(i int) map[string]string {
	col := func(name, cast string) string {
		if !s.has(name) {
			return "NULL"
		}
		return duckdb.QuoteIdent(name) + cast
	}
	e := map[string]string{
		"src":         fmt.Sprint(i),
		"source":      s.readRows(),
		"batch":       col(schema.Batch, ""),
		"task":        col(schema.Task, ""),
		"run":         col(schema.Run, "::BIGINT"),
		"step":        col(schema.Step, "::BIGINT"),
		"reward":      col(schema.Reward, "::DOUBLE"),
		"drop_reason": col(schema.DropReason, ""),
		"dropped_by":  col(schema.DroppedBy, ""),
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
	default:
		e["response_length"] = "NULL"
	}
	switch {
	case s.has(schema.Advantages, schema.ActionMask):
		// The mean over the action-mask tokens, as the report's advantage.
		e["advantage"] = "list_avg(list_filter(advantages, (a, k) -> action_mask[k]))"
	case s.has(schema.Advantages):
		e["advantage"] = "list_avg(advantages)"
	default:
		e["advantage"] = "NULL"
	}
	return e
}

// readRows is the read_parquet call over the source's files with each row's
// file name and row number (columns filename and file_row_number).
func (s source) readRows() string {
	return duckdb.ReadParquet(s.files, "filename = true", "file_row_number = true")
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
