package trinity

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestBusyByCode: a writer's BEGIN IMMEDIATE while another connection
// (Trinity, which takes no file lock) holds SQLite's write lock waits out
// the lock wait and says who held it; busy tells SQLite's busy error by
// its code (SQLITE_BUSY), wrapped or not, and no message by its words.
func TestBusyByCode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "b.db")
	holder, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if _, err := holder.Exec("CREATE TABLE x (a INTEGER)"); err != nil {
		t.Fatal(err)
	}
	held, err := holder.Begin() // BEGIN IMMEDIATE: the write lock
	if err != nil {
		t.Fatal(err)
	}
	loc, err := ParseURL("sqlite:///" + path + "?table=t")
	if err != nil {
		t.Fatal(err)
	}
	loc.LockWait = 300 * time.Millisecond
	ctx := context.Background()
	db, err := open(ctx, loc, true)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, raw := db.BeginTx(ctx, nil)
	for _, c := range []struct {
		err  error
		want bool
	}{
		{raw, true},
		{fmt.Errorf("begin: %w", raw), true},
		{errors.New("database is locked (5) (SQLITE_BUSY)"), false},
		{errNoTable, false},
	} {
		if got := busy(c.err); got != c.want {
			t.Errorf("busy(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	if _, err := begin(ctx, loc, db); err == nil || !strings.Contains(err.Error(), "has held the database's write lock for 300ms") {
		t.Errorf("begin under another's write lock: %v, want it to wait 300ms and say so", err)
	}
	if err := held.Rollback(); err != nil {
		t.Fatal(err)
	}
	tx, err := begin(ctx, loc, db)
	if err != nil {
		t.Fatalf("begin once the lock is free: %v", err)
	}
	tx.Rollback()
}

// TestMissingTableByCode: a table is missing by columnsOf's errNoTable or
// PostgreSQL's SQLSTATE 42P01 (undefined_table), wrapped or not, never by
// a message's words; on SQLite columnsOf finds a table missing without a
// failed statement.
func TestMissingTableByCode(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{errNoTable, true},
		{fmt.Errorf("probe: %w", errNoTable), true},
		{&pgconn.PgError{Code: pgUndefinedTable}, true},
		{fmt.Errorf("select: %w", &pgconn.PgError{Code: pgUndefinedTable}), true},
		{&pgconn.PgError{Code: "42501", Message: "no such table"}, false}, // insufficient_privilege
		{errors.New("SQL logic error: no such table: t (1)"), false},
		{errors.New(`ERROR: relation "t" does not exist (SQLSTATE 42P01)`), false},
	} {
		if got := missingTable(c.err); got != c.want {
			t.Errorf("missingTable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	path := filepath.Join(t.TempDir(), "m.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE "Here" (a INTEGER, B TEXT)`); err != nil {
		t.Fatal(err)
	}
	loc := Location{Driver: "sqlite", DSN: path, Table: "here"}
	for _, c := range []struct {
		table  string
		exists bool
		cols   string
	}{
		{"here", true, "a,b"}, // SQLite's names are case-insensitive
		{"there", false, ""},
	} {
		cols, exists, err := columnsOf(context.Background(), db, loc, c.table)
		if err != nil || exists != c.exists || strings.Join(cols, ",") != c.cols {
			t.Errorf("columnsOf(%s) = %v, %v, %v; want %s, %v", c.table, cols, exists, err, c.cols, c.exists)
		}
	}
}
