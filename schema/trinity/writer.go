package trinity

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/apache/arrow/go/v17/arrow"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/rftpipe/rftpipe/schema"
)

// Writer writes store rows into a buffer table in one transaction: the
// table (created with upstream's DDL when absent) and its rows become
// visible at Commit, and nothing does when the write fails or is aborted.
// The writers of one Group into one database share its transaction
// (session): it commits when the last of them commits. The transaction
// begins before the writer looks at the tables and holds the table's write
// lock to its end, so concurrent writers of one table run one after the
// other and each sees what the one before committed (writeLock).
type Writer struct {
	loc    Location
	ctx    context.Context
	kind   Kind
	layout Layout
	s      *session
	tx     *sql.Tx
	stmt   *sql.Stmt
	blob   *sql.Stmt // 0.6: the blob table's insert
	rec    record
	buf    []byte
	rows   int64
	done   bool
	// maxBytes is the 0.6 payload limit (MaxExpSize); 0: none.
	maxBytes int64
}

// CreateOptions configures Create.
type CreateOptions struct {
	// Group, when set, makes the writers created with it that write into
	// one database share its transaction (see Group); nil: the writer is a
	// group of its own.
	Group *Group
	// TempFile creates the temp file an SQLite database that does not exist
	// yet is written to, beside target (os.CreateTemp's when nil).
	TempFile func(target string) (*os.File, error)
}

func (o CreateOptions) tempFile(target string) (*os.File, error) {
	if o.TempFile != nil {
		return o.TempFile(target)
	}
	return os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".*.tmp")
}

// Create opens a writer for the buffer table at rawURL for rows of store
// schema s; ctx (a signal) stops connecting, waiting for locks and
// writing, and the write is then rolled back. The table's layout is the
// existing table's, else schema_type from the URL, else the layout of the
// buffer s was read from (MetaSchemaType), else dpo when s has chosen and
// rejected, experience otherwise. The layout likewise: the existing
// table's (0.6 rows into a mixed one, as upstream 0.6 writes), else layout
// from the URL, else the layout of the buffer s was read from
// (MetaLayout), else 0.5. A table that already holds rows is refused unless
// the URL says if_exists=append or if_exists=replace.
func Create(ctx context.Context, rawURL string, s *arrow.Schema, opts CreateOptions) (*Writer, error) {
	loc, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if err := loc.checkWriteNames(); err != nil {
		return nil, err
	}
	w := &Writer{loc: loc, ctx: ctx}
	g := opts.Group
	if g == nil {
		g = NewGroup()
	}
	if w.s, err = g.join(ctx, loc, opts); err != nil {
		return nil, err
	}
	w.tx = w.s.tx
	if err := w.begin(s); err != nil {
		w.s.abort(err)
		w.done = true
		return nil, err
	}
	return w, nil
}

// writeLock takes the table's write lock in the transaction: on SQLite the
// transaction holds the database's (BEGIN IMMEDIATE, session); on
// PostgreSQL it takes a transaction advisory lock on the schema-qualified
// table name, which every rftpipe writer of the table takes before it
// looks at it, waiting as long as the URL's lock_wait.
func (w *Writer) writeLock() error {
	loc := w.loc
	if loc.Driver != "pgx" {
		return nil
	}
	ctx, cancel := context.WithTimeout(w.ctx, loc.LockWait)
	defer cancel()
	_, err := w.tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(hashtext('rftpipe trinity buffer'), hashtext(current_schema() || '.' || $1))", loc.Table)
	switch {
	case err == nil:
		return nil
	case w.ctx.Err() != nil:
		return locErr(loc, "waiting for the lock of table %s: %v", loc.Table, context.Cause(w.ctx))
	case ctx.Err() != nil:
		return locErr(loc, "another writer has held table %s for %s (lock_wait=SECONDS waits longer)", loc.Table, loc.LockWait)
	}
	return locErr(loc, "cannot lock table %s: %v", loc.Table, err)
}

// hotJournal reports SQLite's SQLITE_READONLY_ROLLBACK: a read-only
// connection found the journal of an interrupted write, which only a
// read-write one may roll back.
func hotJournal(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code() == sqlite3.SQLITE_READONLY_ROLLBACK
}

// busy reports SQLite's "database is locked": SQLITE_BUSY, or one of its
// extended codes.
func busy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}

func (w *Writer) begin(s *arrow.Schema) error {
	loc := w.loc
	if err := w.writeLock(); err != nil {
		return err
	}
	kind, lay, exists, err := tableKind(w.ctx, w.tx, loc)
	if err != nil {
		return err
	}
	md := s.Metadata()
	switch {
	case exists && loc.Layout != "" && loc.Layout != lay && !(lay == LayoutMixed && loc.Layout == Layout06):
		return badTable(loc, "layout=%s, but the table has the %s layout", loc.Layout, lay)
	case exists:
	case loc.Layout != "":
		lay = loc.Layout
	case md.FindKey(MetaLayout) >= 0 && Layout(md.Values()[md.FindKey(MetaLayout)]) != Layout05: // 0.6 or mixed (StoreMeta)
		lay = Layout06
	default:
		lay = Layout05
	}
	if !exists {
		bcols, bexists, err := columnsOf(w.ctx, w.tx, loc, blobTable(loc))
		switch {
		case err != nil:
			return err
		case bexists && isBlobTable(bcols):
			return badTable(loc, "no such table, but %s exists: a blob table without its metadata table", blobTable(loc))
		case bexists && lay == Layout06:
			return badTable(loc, "the 0.6 layout needs a table %s, and one that is not a blob table exists (columns: %s)", blobTable(loc), strings.Join(bcols, ", "))
		}
	}
	switch {
	case exists && loc.Kind != "" && loc.Kind != kind:
		return badTable(loc, "schema_type=%s, but the table is a %s table", loc.Kind, kind)
	case !exists && loc.Kind != "":
		kind = loc.Kind
	case !exists:
		kind = KindOf(s)
	}
	if lay == LayoutMixed {
		lay = Layout06 // new rows as upstream 0.6 writes them
	}
	w.kind, w.layout = kind, lay
	if lay == Layout06 {
		if w.maxBytes, err = MaxExpSize(); err != nil {
			return err
		}
	}
	if exists {
		if err := w.checkRows(lay); err != nil {
			return err
		}
	}
	return setup(w.ctx, loc, "cannot create table "+loc.Table, func(ctx context.Context) error {
		for _, q := range ddl(loc, kind, lay) {
			if _, err := w.tx.ExecContext(ctx, q); err != nil {
				return locErr(loc, "cannot create table %s: %v", loc.Table, err)
			}
		}
		if w.stmt, err = w.tx.PrepareContext(w.ctx, insertSQL(loc, kind, lay)); err != nil {
			return locErr(loc, "cannot prepare the insert: %v", err)
		}
		if lay == Layout06 {
			if w.blob, err = w.tx.PrepareContext(w.ctx, insertBlobSQL(loc)); err != nil {
				return locErr(loc, "cannot prepare the insert: %v", err)
			}
		}
		return nil
	})
}

// checkRows applies if_exists to an existing table, inside the write's
// transaction: one that holds rows is refused (error) or emptied (replace;
// with its blob table in 0.6). On PostgreSQL the tables are first locked
// against other writers' inserts (SHARE ROW EXCLUSIVE) unless appending.
func (w *Writer) checkRows(lay Layout) error {
	loc := w.loc
	tables := []string{loc.Table}
	if lay == Layout06 {
		tables = append(tables, blobTable(loc))
	}
	return setup(w.ctx, loc, "cannot count the rows of "+loc.Table, func(ctx context.Context) error {
		if loc.Driver == "pgx" && loc.IfExists != "append" {
			for _, t := range tables {
				if _, err := w.tx.ExecContext(ctx, "LOCK TABLE "+quoteIdent(t)+" IN SHARE ROW EXCLUSIVE MODE"); err != nil {
					return locErr(loc, "cannot lock table %s: %v", t, err)
				}
			}
		}
		var n int64
		if err := w.tx.QueryRowContext(ctx, "SELECT count(*) FROM "+quoteIdent(loc.Table)).Scan(&n); err != nil {
			return locErr(loc, "cannot count the rows of %s: %v", loc.Table, err)
		}
		if n == 0 {
			return nil
		}
		switch loc.IfExists {
		case "error":
			return badTable(loc, "already holds %d rows (add &if_exists=append or &if_exists=replace)", n)
		case "replace":
			for _, t := range tables {
				if _, err := w.tx.ExecContext(ctx, "DELETE FROM "+quoteIdent(t)); err != nil {
					return locErr(loc, "cannot empty %s: %v", t, err)
				}
			}
		}
		return nil
	})
}

// Kind returns the schema type of the table being written.
func (w *Writer) Kind() Kind { return w.kind }

// Layout returns the layout of the rows being written (0.5 or 0.6).
func (w *Writer) Layout() Layout { return w.layout }

// Write inserts the rows of a record batch, in order. In the 0.6 layout a
// row whose payload is over MaxExpSize is refused, naming the row and the
// size, and so is a NaN reward in an SQLite experience table, which SQLite
// would store as NULL (the transaction then commits nothing).
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
		if w.loc.Driver == "sqlite" && row.cols.reward != nil && math.IsNaN(*row.cols.reward) {
			return schema.Errorf(w.loc.String(), w.rows, schema.Reward, "cannot write into %s table %s: reward NaN (SQLite stores a NaN as NULL, which would change the value)", w.kind, w.loc.Table)
		}
		w.buf = row.blob
		if w.maxBytes > 0 && int64(len(row.blob)) > w.maxBytes {
			return schema.Errorf(w.loc.String(), w.rows, "", "cannot write into %s table %s: a payload of %d bytes, over Trinity 0.6's limit of %d (%s; upstream's writer would skip the experience with a log line only)",
				w.kind, w.loc.Table, len(row.blob), w.maxBytes, MaxExpSizeEnv)
		}
		if err := w.insert(row); err != nil {
			return locErr(w.loc, "insert into %s (row %d): %v", w.loc.Table, w.rows, err)
		}
		w.rows++
	}
	return nil
}

// MaxExpSizeEnv names the environment variable that sets upstream 0.6's
// payload limit, read as upstream reads it.
const MaxExpSizeEnv = "TRINITY_MAX_EXP_SIZE"

// DefaultMaxExpSize is upstream 0.6's payload limit when MaxExpSizeEnv is
// not set: 32 MiB.
const DefaultMaxExpSize = 32 << 20

// MaxExpSize returns the largest payload a 0.6 buffer takes: MaxExpSizeEnv
// when set (0 or less: no limit), else DefaultMaxExpSize. Upstream's 0.6
// writer skips a longer experience with a log line; rftpipe refuses the
// write instead (Write), so that no row is lost silently.
func MaxExpSize() (int64, error) {
	v, ok := os.LookupEnv(MaxExpSizeEnv)
	if !ok {
		return DefaultMaxExpSize, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, schema.BadInputf("%s=%q: want a number of bytes (0 or less: no limit)", MaxExpSizeEnv, v)
	}
	return max(n, 0), nil
}

// insert writes one row: in 0.6 the metadata row, then the blob row with
// the id the database gave it (upstream's write: add, flush, blob).
func (w *Writer) insert(row tableRow) error {
	args := insertArgs(w.kind, w.layout, row)
	if w.layout != Layout06 {
		_, err := w.stmt.ExecContext(w.ctx, args...)
		return err
	}
	var id int64
	if w.loc.Driver == "pgx" {
		if err := w.stmt.QueryRowContext(w.ctx, args...).Scan(&id); err != nil {
			return err
		}
	} else {
		res, err := w.stmt.ExecContext(w.ctx, args...)
		if err != nil {
			return err
		}
		if id, err = res.LastInsertId(); err != nil {
			return err
		}
	}
	_, err := w.blob.ExecContext(w.ctx, id, row.blob)
	return err
}

// Rows returns the number of rows written so far.
func (w *Writer) Rows() int64 { return w.rows }

// Commit makes the table and its rows visible: at once, or, when other
// writers of this process share the database's transaction, when the last
// of them commits.
func (w *Writer) Commit() error {
	if w.done {
		return errors.New("trinity: writer already closed")
	}
	w.done = true
	w.closeStmts()
	if err := w.s.commit(); err != nil {
		return locErr(w.loc, "%v", err)
	}
	return nil
}

// Abort rolls everything back, the writes of the writers sharing the
// transaction included; after Commit it does nothing.
func (w *Writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	w.closeStmts()
	w.s.abort(fmt.Errorf("another output of this database (table %s) failed; nothing was written", w.loc.Table))
}

func (w *Writer) closeStmts() {
	for _, st := range []*sql.Stmt{w.stmt, w.blob} {
		if st != nil {
			st.Close()
		}
	}
}

// Close aborts an uncommitted write (the store's sink interface).
func (w *Writer) Close() error {
	w.Abort()
	return nil
}
