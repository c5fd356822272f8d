package trinity

import (
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
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

// tableKind reads a table's layout from its columns; exists is false when
// there is no such table.
func tableKind(db *sql.DB, loc Location) (k Kind, exists bool, err error) {
	rows, err := db.Query("SELECT * FROM " + quoteIdent(loc.Table) + " WHERE 1 = 0")
	if err != nil {
		if missingTable(err) {
			return "", false, nil
		}
		return "", false, locErr(loc, "cannot read table %s: %v", loc.Table, err)
	}
	cols, err := rows.Columns()
	rows.Close()
	if err != nil {
		return "", true, locErr(loc, "cannot read table %s: %v", loc.Table, err)
	}
	has := map[string]bool{}
	for _, c := range cols {
		has[strings.ToLower(c)] = true
	}
	bad := func(why string) (Kind, bool, error) {
		sort.Strings(cols)
		return "", true, badTable(loc, "%s (columns: %s)", why, strings.Join(cols, ", "))
	}
	switch {
	case !has["id"] || !has[ColumnPayload]:
		if has["serialized_exp"] {
			return bad("an experience table of Trinity 0.3.x or earlier: not supported")
		}
		return bad("not a Trinity-RFT buffer table")
	case has["task_id"] && has["run_id"] && has["msg_id"] && has["model_version"] && has["reward"]:
		return KindExperience, true, nil
	case has["chosen_message_list"] && has["rejected_message_list"]:
		return KindDPO, true, nil
	case has["message_list"] && !has["prompt"]:
		return KindSFT, true, nil
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

// ddl returns the statements that create a table of kind k with the
// columns and indexes upstream creates (SQLAlchemy's DDL, verbatim on
// SQLite).
func ddl(loc Location, k Kind) []string {
	t := quoteIdent(loc.Table)
	pg := loc.Driver == "pgx"
	typ := func(sqlite, postgres string) string {
		if pg {
			return postgres
		}
		return sqlite
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
			"experience_bytes " + typ("BLOB", "BYTEA"),
			"reward FLOAT",
			"consumed INTEGER",
		}
	case KindDPO:
		cols = []string{
			"id " + typ("INTEGER", "SERIAL") + " NOT NULL",
			"chosen_message_list JSON",
			"rejected_message_list JSON",
			"experience_bytes " + typ("BLOB", "BYTEA"),
		}
	case KindSFT:
		cols = []string{
			"id " + typ("INTEGER", "SERIAL") + " NOT NULL",
			"message_list JSON",
			"experience_bytes " + typ("BLOB", "BYTEA"),
		}
	}
	cols = append(cols, "PRIMARY KEY (id)")
	stmts := []string{"CREATE TABLE IF NOT EXISTS " + t + " (\n\t" + strings.Join(cols, ", \n\t") + "\n)"}
	if k == KindExperience {
		for _, c := range []string{"consumed", "model_version", "msg_id", "run_id", "task_id"} {
			stmts = append(stmts, fmt.Sprintf("CREATE INDEX IF NOT EXISTS %s ON %s (%s)", quoteIdent("ix_"+loc.Table+"_"+c), t, c))
		}
	}
	return stmts
}

// insertSQL returns the INSERT of one row of kind k.
func insertSQL(loc Location, k Kind) string {
	var cols []string
	switch k {
	case KindExperience:
		cols = []string{"task_id", "run_id", "msg_id", "model_version", "experience_bytes", "reward", "consumed"}
	case KindDPO:
		cols = []string{"chosen_message_list", "rejected_message_list", "experience_bytes"}
	case KindSFT:
		cols = []string{"message_list", "experience_bytes"}
	}
	ph := make([]string, len(cols))
	for i := range ph {
		ph[i] = "?"
		if loc.Driver == "pgx" {
			ph[i] = fmt.Sprintf("$%d", i+1)
		}
	}
	return "INSERT INTO " + quoteIdent(loc.Table) + " (" + strings.Join(cols, ", ") + ") VALUES (" + strings.Join(ph, ", ") + ")"
}

// insertArgs returns the INSERT's arguments for a row.
func insertArgs(k Kind, row tableRow) []any {
	switch k {
	case KindExperience:
		return []any{nullable(row.cols.taskID), nullable(row.cols.runID), nullable(row.cols.msgID),
			nullable(row.cols.modelVersion), row.blob, nullable(row.cols.reward), 0}
	case KindDPO:
		return []any{nullable(row.messages[1]), nullable(row.messages[2]), row.blob}
	}
	return []any{nullable(row.messages[0]), row.blob}
}

func nullable[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
