package trinity

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	_ "modernc.org/sqlite"             // database/sql driver "sqlite"

	"github.com/rftpipe/rftpipe/schema"
)

// setupTimeout bounds each statement that sets up a read or a write (table
// probes, the writers' lock, counts, DDL): a server that accepts the
// connection and then never answers fails within it. The rows themselves
// stream without a deadline, stopped by the caller's context.
const setupTimeout = 60 * time.Second

// open connects to the buffer's database, honouring ctx (a signal) and the
// URL's connect_timeout. An SQLite file must exist; a writer's (write)
// waits for a busy database briefly, retrying while the lock wait lasts
// (begin), a reader's as long as SQLite's busy timeout.
func open(ctx context.Context, loc Location, write bool) (*sql.DB, error) {
	dsn := loc.DSN
	if loc.Driver == "sqlite" {
		if _, err := os.Stat(dsn); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, schema.Errorf(loc.String(), -1, "", "no such database file %s", dsn)
			}
			return nil, locErr(loc, "cannot open: %v", err)
		}
		opts := "?mode=ro&_pragma=busy_timeout(30000)"
		if write {
			opts = "?mode=rw&_pragma=busy_timeout(100)&_txlock=immediate"
		}
		dsn = "file:" + (&url.URL{Path: dsn}).EscapedPath() + opts
	}
	db, err := sql.Open(loc.Driver, dsn)
	if err != nil {
		return nil, locErr(loc, "cannot open: %v", err)
	}
	db.SetMaxOpenConns(1) // one transaction, one connection
	err = db.PingContext(ctx)
	if loc.Driver == "sqlite" && !write && hotJournal(err) {
		db.Close()
		return nil, locErr(loc, "cannot read: %s-journal is the journal of a write that was killed; "+
			"the database reads as it was before that write once the journal is rolled back, which any "+
			"read-write open does (sqlite3 %s 'PRAGMA quick_check', or an rftpipe write into it)", loc.DSN, loc.DSN)
	}
	if err != nil {
		db.Close()
		if ctx.Err() != nil {
			return nil, locErr(loc, "connecting: %v", context.Cause(ctx))
		}
		return nil, locErr(loc, "cannot connect: %s", connectError(err))
	}
	return db, nil
}

// connectError is the driver's connect error in one line. pgx reports each
// attempt on a line of its own, the TLS one first when sslmode falls back
// to plain TCP (sslmode=prefer, the default): that attempt's "server
// refused TLS connection" is left out when another attempt says more, and
// a line repeated (one per address tried) is said once.
func connectError(err error) string {
	lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
	var keep []string
	for _, l := range lines[1:] {
		if l = strings.TrimSpace(l); l != "" && !strings.Contains(l, "server refused TLS connection") && !slices.Contains(keep, l) {
			keep = append(keep, l)
		}
	}
	if len(lines) == 1 || len(keep) == 0 {
		return strings.Join(strings.Fields(err.Error()), " ")
	}
	return strings.TrimSpace(lines[0]) + " " + strings.Join(keep, "; ")
}

// setup runs f under the setup deadline and tells a deadline or a signal
// apart from the database's own errors.
func setup(ctx context.Context, loc Location, what string, f func(ctx context.Context) error) error {
	sctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	err := f(sctx)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return locErr(loc, "%s: %v", what, context.Cause(ctx))
	case sctx.Err() != nil:
		return locErr(loc, "%s: no answer within %s (an unresponsive server, or another writer holding table %s)", what, setupTimeout, loc.Table)
	}
	return err
}

// locErr is a problem with the database as a whole that is not bad input
// (one that cannot be reached, say).
func locErr(loc Location, format string, args ...any) error {
	return fmt.Errorf("%s: %s", loc, schema.Redact(fmt.Sprintf(format, args...)))
}

// quoteIdent quotes a table or index name for SQL (ParseURL admits only
// letters, digits and underscores) where SQLAlchemy does: a name with an
// upper-case letter (case-sensitive on PostgreSQL) or a reserved word.
func quoteIdent(s string) string {
	if l := strings.ToLower(s); l == s && !reserved[l] {
		return s
	}
	return `"` + s + `"`
}

// reserved are the words SQLite and PostgreSQL reserve (the keywords of
// both, a name that is one is quoted).
var reserved = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`abort action add after all alter always analyse analyze and any array as asc
		asymmetric attach authorization autoincrement before begin between binary both by cascade case cast check
		collate collation column commit concurrently conflict constraint create cross current current_catalog
		current_date current_role current_schema current_time current_timestamp current_user database default
		deferrable deferred delete desc detach distinct do drop each else end escape except exclude exclusive exists
		explain fail false fetch filter first following for foreign freeze from full generated glob grant group
		groups having if ignore ilike immediate in index indexed initially inner insert instead intersect into is
		isnull join key last lateral leading left like limit localtime localtimestamp match materialized natural no
		not nothing notnull null nulls of offset on only or order others outer over overlaps partition placing plan
		pragma preceding primary query raise range recursive references regexp reindex release rename replace
		restrict returning right rollback row rows savepoint select session_user set similar some symmetric table
		tablesample temp temporary then ties to trailing transaction trigger true unbounded union unique update user
		using vacuum values variadic verbose view virtual when where window with without`) {
		reserved[w] = true
	}
}

// Layout is how a buffer stores its payloads: Trinity-RFT 0.5's one table
// with an experience_bytes column, or 0.6's metadata table <name> plus a
// <name>_blob table (id, experience_bytes) joined on id. LayoutMixed is a
// 0.5 table into which 0.6 wrote: both hold payloads, row by row.
type Layout string

// The layouts.
const (
	Layout05    Layout = "0.5"
	Layout06    Layout = "0.6"
	LayoutMixed Layout = "mixed"
)

// blobTable names the blob table of a 0.6 buffer.
func blobTable(loc Location) string { return loc.Table + "_blob" }

// querier is a database or a transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// columnsOf returns a table's column names, lower-cased; exists is false
// when there is no such table.
func columnsOf(ctx context.Context, db querier, loc Location, table string) (cols []string, exists bool, err error) {
	err = setup(ctx, loc, "cannot read table "+table, func(ctx context.Context) error {
		// Ask first whether the table is there: a failed statement would
		// end a PostgreSQL transaction, and SQLite's error for a missing
		// table has only the generic code SQLITE_ERROR.
		exists := "SELECT to_regclass($1) IS NOT NULL"
		name := quoteIdent(table)
		if loc.Driver != "pgx" {
			// SQLite's name resolution: main, temp and attached schemas.
			exists, name = "SELECT count(*) > 0 FROM pragma_table_info(?)", table
		}
		var there bool
		rows, err := db.QueryContext(ctx, exists, name)
		if err != nil {
			return err
		}
		for rows.Next() {
			err = rows.Scan(&there)
		}
		if rows.Close(); err != nil {
			return err
		}
		if !there {
			return errNoTable
		}
		rows, err = db.QueryContext(ctx, "SELECT * FROM "+quoteIdent(table)+" WHERE 1 = 0")
		if err != nil {
			return err
		}
		cols, err = rows.Columns()
		rows.Close()
		return err
	})
	if err != nil {
		if missingTable(err) {
			return nil, false, nil
		}
		return nil, false, locErr(loc, "cannot read table %s: %v", table, err)
	}
	for i := range cols {
		cols[i] = strings.ToLower(cols[i])
	}
	return cols, true, nil
}

// isBlobTable reports whether a table of columns cols is a 0.6 blob table:
// exactly upstream's columns, id and experience_bytes. Any other table
// named <name>_blob (a 0.5 buffer of that name, say) is unrelated to
// <name>: never read, emptied or written with it.
func isBlobTable(cols []string) bool {
	return len(cols) == 2 && contains(cols, "id") && contains(cols, ColumnPayload)
}

// tableKind reads a buffer's schema type and layout from its tables'
// columns (spec: <name> with experience_bytes is 0.5, else a blob table
// <name>_blob (isBlobTable) makes it 0.6, and both mixed); exists is false
// when there is no table <name>.
func tableKind(ctx context.Context, db querier, loc Location) (k Kind, lay Layout, exists bool, err error) {
	cols, exists, err := columnsOf(ctx, db, loc, loc.Table)
	if err != nil || !exists {
		return "", "", exists, err
	}
	bcols, bexists, err := columnsOf(ctx, db, loc, blobTable(loc))
	if err != nil {
		return "", "", true, err
	}
	has := map[string]bool{}
	for _, c := range cols {
		has[c] = true
	}
	blob := bexists && isBlobTable(bcols)
	bad := func(why string) (Kind, Layout, bool, error) {
		sort.Strings(cols)
		return "", "", true, badTable(loc, "%s (columns: %s)", why, strings.Join(cols, ", "))
	}
	switch {
	case has["id"] && has[ColumnPayload] && blob:
		lay = LayoutMixed
	case has["id"] && has[ColumnPayload]:
		lay = Layout05
	case has["id"] && blob:
		lay = Layout06
	case has["serialized_exp"]:
		return bad("an experience table of Trinity 0.3.x or earlier: not supported")
	default:
		return bad("not a Trinity-RFT buffer table (no experience_bytes column, no " + blobTable(loc) + " table)")
	}
	// A kind's columns, the ones that tell it first: a table with some of
	// them is told which of the others it lacks.
	for _, kc := range []struct {
		k    Kind
		cols []string
	}{
		{KindExperience, []string{"task_id", "run_id", "msg_id", "model_version", "reward"}},
		{KindDPO, []string{"chosen_message_list", "rejected_message_list"}},
		{KindSFT, []string{"message_list"}},
	} {
		var missing []string
		for _, c := range kc.cols {
			if !has[c] {
				missing = append(missing, c)
			}
		}
		switch {
		case len(missing) == 0 && !(kc.k == KindSFT && has["prompt"]):
			return kc.k, lay, true, nil
		case len(missing) < len(kc.cols) && !has["prompt"]:
			return bad(fmt.Sprintf("no column %s (a Trinity-RFT %s table has %s)", strings.Join(missing, ", "), kc.k, strings.Join(kc.cols, ", ")))
		}
	}
	if has["prompt"] && has["response"] {
		return bad("an experience table of Trinity 0.3.x or earlier (no task_id, run_id, msg_id): not supported")
	}
	return bad("not a Trinity-RFT buffer table")
}

// pgUndefinedTable is PostgreSQL's SQLSTATE undefined_table.
const pgUndefinedTable = "42P01"

// errNoTable is columnsOf's word for a table PostgreSQL does not have.
var errNoTable = errors.New("no such table")

// missingTable reports whether err says the table is not there: columnsOf's
// errNoTable, or PostgreSQL's undefined_table (the table dropped after
// columnsOf asked).
func missingTable(err error) bool {
	var pe *pgconn.PgError
	return errors.Is(err, errNoTable) || errors.As(err, &pe) && pe.Code == pgUndefinedTable
}

func badTable(loc Location, format string, args ...any) error {
	return schema.Errorf(loc.String(), -1, "", "table %s: %s", loc.Table, fmt.Sprintf(format, args...))
}

// ddl returns the statements that create the tables of kind k and layout
// lay with the columns and indexes upstream creates (SQLAlchemy's DDL,
// verbatim on SQLite): 0.6 has no payload column in <name>, a <name>_blob
// table, and a sixth index, on reward.
func ddl(loc Location, k Kind, lay Layout) []string {
	t := quoteIdent(loc.Table)
	pg := loc.Driver == "pgx"
	typ := func(sqlite, postgres string) string {
		if pg {
			return postgres
		}
		return sqlite
	}
	payload := []string{"experience_bytes " + typ("BLOB", "BYTEA")}
	if lay == Layout06 {
		payload = nil
	}
	var cols []string
	switch k {
	case KindExperience:
		cols = []string{
			"id " + typ("INTEGER", "SERIAL") + " NOT NULL",
			"timestamp " + typ("DATETIME DEFAULT (CURRENT_TIMESTAMP)", "TIMESTAMP WITHOUT TIME ZONE DEFAULT now()"),
			"task_id VARCHAR(64)",
			"run_id INTEGER",
			"msg_id VARCHAR(64)",
			"model_version INTEGER",
		}
		cols = append(append(cols, payload...), "reward FLOAT", "consumed INTEGER")
	case KindDPO:
		cols = []string{
			"id " + typ("INTEGER", "SERIAL") + " NOT NULL",
			"chosen_message_list JSON",
			"rejected_message_list JSON",
		}
		cols = append(cols, payload...)
	case KindSFT:
		cols = []string{
			"id " + typ("INTEGER", "SERIAL") + " NOT NULL",
			"message_list JSON",
		}
		cols = append(cols, payload...)
	}
	table := func(name string, cols ...string) string {
		cols = append(cols, "PRIMARY KEY (id)")
		return "CREATE TABLE IF NOT EXISTS " + quoteIdent(name) + " (\n\t" + strings.Join(cols, ", \n\t") + "\n)"
	}
	stmts := []string{table(loc.Table, cols...)}
	indexed := []string{"consumed", "model_version", "msg_id", "run_id", "task_id"}
	if lay == Layout06 {
		stmts = append(stmts, table(blobTable(loc), "id "+typ("INTEGER", "SERIAL")+" NOT NULL", "experience_bytes "+typ("BLOB", "BYTEA")+" NOT NULL"))
		indexed = []string{"consumed", "model_version", "msg_id", "reward", "run_id", "task_id"}
	}
	if k == KindExperience {
		for _, c := range indexed {
			stmts = append(stmts, fmt.Sprintf("CREATE INDEX IF NOT EXISTS %s ON %s (%s)", quoteIdent(indexName(loc, c)), t, c))
		}
	}
	return stmts
}

// indexName names the index of column c of <name>, as SQLAlchemy does.
func indexName(loc Location, c string) string { return "ix_" + loc.Table + "_" + c }

// longestIndex is the longest index name a writer of loc may create.
func longestIndex(loc Location) string { return indexName(loc, "model_version") }

// insertSQL returns the INSERT of one row of kind k into <name> (in 0.6,
// without the payload; on PostgreSQL returning the new id).
func insertSQL(loc Location, k Kind, lay Layout) string {
	var cols []string
	switch k {
	case KindExperience:
		cols = []string{"task_id", "run_id", "msg_id", "model_version", "experience_bytes", "reward", "consumed"}
	case KindDPO:
		cols = []string{"chosen_message_list", "rejected_message_list", "experience_bytes"}
	case KindSFT:
		cols = []string{"message_list", "experience_bytes"}
	}
	if lay == Layout06 {
		cols = slices.DeleteFunc(cols, func(c string) bool { return c == ColumnPayload })
	}
	q := insertInto(loc, loc.Table, cols)
	if lay == Layout06 && loc.Driver == "pgx" {
		q += " RETURNING id"
	}
	return q
}

// insertBlobSQL returns the INSERT of a 0.6 blob row.
func insertBlobSQL(loc Location) string {
	return insertInto(loc, blobTable(loc), []string{"id", ColumnPayload})
}

func insertInto(loc Location, table string, cols []string) string {
	ph := make([]string, len(cols))
	for i := range ph {
		ph[i] = "?"
		if loc.Driver == "pgx" {
			ph[i] = fmt.Sprintf("$%d", i+1)
		}
	}
	return "INSERT INTO " + quoteIdent(table) + " (" + strings.Join(cols, ", ") + ") VALUES (" + strings.Join(ph, ", ") + ")"
}

// insertArgs returns the INSERT's arguments for a row of <name> (without
// the payload in 0.6).
func insertArgs(k Kind, lay Layout, row tableRow) []any {
	var blob []any
	if lay != Layout06 {
		blob = []any{row.blob}
	}
	switch k {
	case KindExperience:
		return append(append([]any{nullable(row.cols.taskID), nullable(row.cols.runID), nullable(row.cols.msgID),
			nullable(row.cols.modelVersion)}, blob...), nullable(row.cols.reward), 0)
	case KindDPO:
		return append([]any{nullable(row.messages[1]), nullable(row.messages[2])}, blob...)
	}
	return append([]any{nullable(row.messages[0])}, blob...)
}

func nullable[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
