package trinity_test

import (
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/trinity"
)

// sqliteCopy copies a fixture database into a temp file and runs stmts on it.
func sqliteCopy(t *testing.T, fixture string, stmts ...string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtures, fixture))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "b.db")
	writeFile(t, path, b)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return path
}

// TestUnrelatedBlobTable: a table named <name>_blob that lacks upstream's
// exact blob columns (id, experience_bytes) is another buffer, not <name>'s
// blob table: reading, replacing, appending to and creating <name> leave
// it as it is.
func TestUnrelatedBlobTable(t *testing.T) {
	in := filepath.Join(fixtures, "overrides.jsonl")
	// Two 0.5 buffers, exp and exp_blob, in one file.
	two := func(t *testing.T) string {
		return sqliteCopy(t, "experience.db",
			"ALTER TABLE experience_buffer RENAME TO exp",
			"CREATE TABLE exp_blob AS SELECT * FROM exp")
	}
	t.Run("read", func(t *testing.T) {
		path := two(t)
		for _, table := range []string{"exp", "exp_blob"} {
			r := openStore(t, sqliteURL(path, table))
			if lay, _ := r.Schema().Metadata().GetValue(trinity.MetaLayout); lay != string(trinity.Layout05) {
				t.Errorf("%s: layout %q, want 0.5", table, lay)
			}
			r.Close()
			if n := len(readStore(t, sqliteURL(path, table)).rows); n != 64 {
				t.Errorf("%s: %d rows, want 64", table, n)
			}
		}
	})
	for _, ifExists := range []string{"replace", "append"} {
		t.Run(ifExists, func(t *testing.T) {
			path := two(t)
			copyStore(t, in, sqliteURL(path, "exp")+"&if_exists="+ifExists)
			if n := rowCount(t, path, "exp_blob"); n != 64 {
				t.Errorf("exp_blob holds %d rows after writing exp, want its 64", n)
			}
			want := map[string]int{"replace": 8, "append": 72}[ifExists]
			if n := rowCount(t, path, "exp"); n != want {
				t.Errorf("exp holds %d rows, want %d", n, want)
			}
		})
	}
	t.Run("create", func(t *testing.T) {
		path := sqliteCopy(t, "experience.db", "ALTER TABLE experience_buffer RENAME TO exp_blob")
		copyStore(t, in, sqliteURL(path, "exp"))
		if n := len(readStore(t, sqliteURL(path, "exp")).rows); n != 8 {
			t.Errorf("exp: %d rows, want 8", n)
		}
		if n := rowCount(t, path, "exp_blob"); n != 64 {
			t.Errorf("exp_blob holds %d rows, want its 64", n)
		}
	})
	t.Run("create 0.6 beside an unrelated _blob", func(t *testing.T) {
		path := sqliteCopy(t, "experience.db", "ALTER TABLE experience_buffer RENAME TO exp_blob")
		r := openStore(t, in)
		defer r.Close()
		_, err := copyErr(r, sqliteURL(path, "exp")+"&layout=0.6")
		if !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), "the 0.6 layout needs a table exp_blob, and one that is not a blob table exists") {
			t.Errorf("got %v", err)
		}
		if n := rowCount(t, path, "exp_blob"); n != 64 {
			t.Errorf("exp_blob holds %d rows, want its 64", n)
		}
	})
	t.Run("create 0.5 beside an orphan blob table", func(t *testing.T) {
		path := sqliteCopy(t, "v0.6/experience.db", "DROP TABLE experience_buffer")
		r := openStore(t, in)
		defer r.Close()
		_, err := copyErr(r, sqliteURL(path, "experience_buffer")+"&layout=0.5")
		if !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), "a blob table without its metadata table") {
			t.Errorf("got %v", err)
		}
	})
}

// TestDuplicateIDs: a 0.6 buffer whose blob table (or metadata table)
// holds an id twice is refused naming the table, the id and the count,
// never read as an extra row.
func TestDuplicateIDs(t *testing.T) {
	// Tables without upstream's primary key, one id doubled.
	rekey := func(table string) []string {
		return []string{
			"CREATE TABLE t2 AS SELECT * FROM " + table + " WHERE 0",
			"INSERT INTO t2 SELECT * FROM " + table + " ORDER BY id",
			"INSERT INTO t2 SELECT * FROM " + table + " WHERE id = 5",
			"DROP TABLE " + table,
			"ALTER TABLE t2 RENAME TO " + table,
		}
	}
	for _, tc := range []struct {
		table string
		want  string
	}{
		{"experience_buffer_blob", "table experience_buffer_blob, id 5: 2 rows hold this id"},
		{"experience_buffer", "table experience_buffer, id 5: 2 rows hold this id"},
	} {
		t.Run(tc.table, func(t *testing.T) {
			path := sqliteCopy(t, "v0.6/experience.db", rekey(tc.table)...)
			err := readErr(sqliteURL(path, "experience_buffer"))
			var ie *schema.InputError
			if !errors.Is(err, schema.ErrBadInput) || !errors.As(err, &ie) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want bad input %q", err, tc.want)
			}
			if ie.Row != 5 || ie.Column != "id" {
				t.Errorf("row %d column %q, want row 5 (the second id 5) column id", ie.Row, ie.Column)
			}
		})
	}
}

// TestPostgresUnrelatedBlobTable: on PostgreSQL too, replacing a 0.5
// buffer exp leaves a 0.5 buffer named exp_blob as it is.
func TestPostgresUnrelatedBlobTable(t *testing.T) {
	in := filepath.Join(fixtures, "overrides.jsonl")
	exp, blob := pgURL(t, "unrel_exp"), pgURL(t, "unrel_exp_blob")
	copyStore(t, in, exp+"&if_exists=replace")
	copyStore(t, in, blob+"&if_exists=replace")
	copyStore(t, filepath.Join(fixtures, "experience.jsonl"), exp+"&if_exists=replace")
	if n := len(readStore(t, blob).rows); n != 8 {
		t.Errorf("unrel_exp_blob holds %d rows after replacing unrel_exp, want its 8", n)
	}
	if n := len(readStore(t, exp).rows); n != 64 {
		t.Errorf("unrel_exp holds %d rows, want 64", n)
	}
}
