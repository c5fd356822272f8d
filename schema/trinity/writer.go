package trinity

import (
	"context"
	"database/sql"
	"errors"
	"os"

	"github.com/apache/arrow/go/v17/arrow"

	"github.com/rftpipe/rftpipe/schema"
)

// Writer writes store rows into a buffer table in one transaction: the
// table (created with upstream's DDL when absent) and its rows become
// visible at Commit, and nothing does when the write fails or is aborted.
type Writer struct {
	loc     Location
	kind    Kind
	db      *sql.DB
	tx      *sql.Tx
	stmt    *sql.Stmt
	created string // the SQLite file this writer created, removed on Abort
	rec     record
	buf     []byte
	rows    int64
	done    bool
}

// Create opens a writer for the buffer table at rawURL for rows of store
// schema s. The table's layout is the existing table's, else schema_type
// from the URL, else the layout of the buffer s was read from
// (MetaSchemaType), else dpo when s has chosen and rejected, experience
// otherwise. A table that already holds rows is refused unless the URL says
// if_exists=append or if_exists=replace.
func Create(rawURL string, s *arrow.Schema) (*Writer, error) {
	loc, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	w := &Writer{loc: loc}
	if loc.Driver == "sqlite" {
		if _, err := os.Stat(loc.DSN); errors.Is(err, os.ErrNotExist) {
			w.created = loc.DSN
		}
	}
	if w.db, err = open(loc, true); err != nil {
		return nil, err
	}
	if err := w.begin(s); err != nil {
		w.Abort()
		return nil, err
	}
	return w, nil
}

func (w *Writer) begin(s *arrow.Schema) error {
	loc := w.loc
	kind, exists, err := tableKind(w.db, loc)
	if err != nil {
		return err
	}
	switch {
	case exists && loc.Kind != "" && loc.Kind != kind:
		return badTable(loc, "schema_type=%s, but the table is a %s table", loc.Kind, kind)
	case !exists && loc.Kind != "":
		kind = loc.Kind
	case !exists:
		kind = KindExperience
		if len(s.FieldIndices(schema.Chosen)) > 0 && len(s.FieldIndices(schema.Rejected)) > 0 {
			kind = KindDPO
		}
		if md := s.Metadata(); md.FindKey(MetaSchemaType) >= 0 {
			if k, err := ParseKind(md.Values()[md.FindKey(MetaSchemaType)]); err == nil {
				kind = k
			}
		}
	}
	w.kind = kind
	if w.tx, err = w.db.BeginTx(context.Background(), nil); err != nil {
		return locErr(loc, "cannot begin a transaction: %v", err)
	}
	if exists {
		var n int64
		if err := w.tx.QueryRow("SELECT count(*) FROM " + quoteIdent(loc.Table)).Scan(&n); err != nil {
			return locErr(loc, "cannot count the rows of %s: %v", loc.Table, err)
		}
		if n > 0 {
			switch loc.IfExists {
			case "error":
				return badTable(loc, "already holds %d rows (add &if_exists=append or &if_exists=replace)", n)
			case "replace":
				if _, err := w.tx.Exec("DELETE FROM " + quoteIdent(loc.Table)); err != nil {
					return locErr(loc, "cannot empty %s: %v", loc.Table, err)
				}
			}
		}
	}
	for _, q := range ddl(loc, kind) {
		if _, err := w.tx.Exec(q); err != nil {
			return locErr(loc, "cannot create table %s: %v", loc.Table, err)
		}
	}
	if w.stmt, err = w.tx.Prepare(insertSQL(loc, kind)); err != nil {
		return locErr(loc, "cannot prepare the insert: %v", err)
	}
	return nil
}

// Kind returns the layout of the table being written.
func (w *Writer) Kind() Kind { return w.kind }

// Write inserts the rows of a record batch, in order.
func (w *Writer) Write(rec arrow.Record) error {
	cols := newBatchCols(rec)
	for i := 0; i < int(rec.NumRows()); i++ {
		fe := w.rec.fromStore(cols, i)
		var row tableRow
		if fe == nil {
			row, fe = w.rec.toRow(w.kind, w.buf[:0])
		}
		if fe != nil {
			return schema.Errorf(w.loc.String(), w.rows, fe.field, "cannot write into %s table %s: %s", w.kind, w.loc.Table, fe.msg)
		}
		w.buf = row.blob
		if _, err := w.stmt.Exec(insertArgs(w.kind, row)...); err != nil {
			return locErr(w.loc, "insert into %s (row %d): %v", w.loc.Table, w.rows, err)
		}
		w.rows++
	}
	return nil
}

// Rows returns the number of rows written so far.
func (w *Writer) Rows() int64 { return w.rows }

// Commit makes the table and its rows visible.
func (w *Writer) Commit() error {
	if w.done {
		return errors.New("trinity: writer already closed")
	}
	w.done = true
	w.stmt.Close()
	err := w.tx.Commit()
	if cerr := w.db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		w.removeCreated()
		return locErr(w.loc, "commit: %v", err)
	}
	return nil
}

// Abort rolls everything back (a database file the writer created is
// removed); after Commit it does nothing.
func (w *Writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	if w.stmt != nil {
		w.stmt.Close()
	}
	if w.tx != nil {
		w.tx.Rollback()
	}
	w.db.Close()
	w.removeCreated()
}

func (w *Writer) removeCreated() {
	if w.created != "" {
		os.Remove(w.created)
		os.Remove(w.created + "-journal")
	}
}

// Close aborts an uncommitted write (the store's sink interface).
func (w *Writer) Close() error {
	w.Abort()
	return nil
}
