package trinity

import (
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	_ "modernc.org/sqlite"             // database/sql driver "sqlite"

	"github.com/rftpipe/rftpipe/schema"
)

// open connects to the buffer's database. An SQLite file must exist unless
// create is set.
func open(loc Location, create bool) (*sql.DB, error) {
	dsn := loc.DSN
	if loc.Driver == "sqlite" {
		if _, err := os.Stat(dsn); err != nil && !create {
			if errors.Is(err, os.ErrNotExist) {
				return nil, schema.Errorf(loc.String(), -1, "", "no such database file %s", dsn)
			}
			return nil, locErr(loc, "cannot open: %v", err)
		}
		mode := "ro"
		if create {
			mode = "rwc"
		}
		dsn = "file:" + (&url.URL{Path: dsn}).EscapedPath() + "?mode=" + mode + "&_pragma=busy_timeout(30000)&_txlock=immediate"
	}
	db, err := sql.Open(loc.Driver, dsn)
	if err != nil {
		return nil, locErr(loc, "cannot open: %v", err)
	}
	db.SetMaxOpenConns(1) // one transaction, one connection
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, locErr(loc, "cannot connect: %v", err)
	}
	return db, nil
}

// locErr is a problem with the database as a whole that is not bad input
// (one that cannot be reached, say).
func locErr(loc Location, format string, args ...any) error {
	return fmt.Errorf("%s: %s", loc, fmt.Sprintf(format, args...))
}

// quoteIdent quotes a table name for SQL (ParseURL admits only letters,
// digits and underscores).
func quoteIdent(s string) string {
	if strings.ToLower(s) == s {
		return s
	}
	return `"` + s + `"`
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

// columnsOf returns a table's column names, lower-cased; exists is false
// when there is no such table.
func columnsOf(db *sql.DB, loc Location, table string) (cols []string, exists bool, err error) {
	rows, err := db.Query("SELECT * FROM " + quoteIdent(table) + " WHERE 1 = 0")
	if err != nil {
		if missingTable(err) {
			return nil, false, nil
		}
		return nil, false, locErr(loc, "cannot read table %s: %v", table, err)
	}
	cols, err = rows.Columns()
	rows.Close()
	if err != nil {
		return nil, true, locErr(loc, "cannot read table %s: %v", table, err)
	}
	for i := range cols {
		cols[i] = strings.ToLower(cols[i])
	}
	return cols, true, nil
}

// tableKind reads a buffer's schema type and layout from its tables'
// columns (spec: <name> with experience_bytes is 0.5, else <name>_blob with
// id and experience_bytes is 0.6); exists is false when there is no table
// <name>.
func tableKind(db *sql.DB, loc Location) (k Kind, lay Layout, exists bool, err error) {
	cols, exists, err := columnsOf(db, loc, loc.Table)
	if err != nil || !exists {
		return "", "", exists, err
	}
	bcols, bexists, err := columnsOf(db, loc, blobTable(loc))
	if err != nil {
		return "", "", true, err
	}
	has := map[string]bool{}
	for _, c := range cols {
		has[c] = true
	}
	blob := bexists && contains(bcols, "id") && contains(bcols, ColumnPayload)
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
	switch {
	case has["task_id"] && has["run_id"] && has["msg_id"] && has["model_version"] && has["reward"]:
		return KindExperience, lay, true, nil
	case has["chosen_message_list"] && has["rejected_message_list"]:
		return KindDPO, lay, true, nil
	case has["message_list"] && !has["prompt"]:
		return KindSFT, lay, true, nil
	case has["prompt"] && has["response"]:
		return bad("an experience table of Trinity 0.3.x or earlier (no task_id, run_id, msg_id): not supported")
	}
	return bad("not a Trinity-RFT buffer table")
}

func missingTable(err error) bool {
	s := err.Error()
	return strings.Contains(s, "no such table") || strings.Contains(s, "SQLSTATE 42P01")
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
			stmts = append(stmts, fmt.Sprintf("CREATE INDEX IF NOT EXISTS %s ON %s (%s)", quoteIdent("ix_"+loc.Table+"_"+c), t, c))
		}
	}
	return stmts
}

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
