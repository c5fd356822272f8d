package trinity_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/schema/trinity"
)

// onlyRow copies edge/bad.db keeping row id alone.
func onlyRow(t *testing.T, id int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtures, "edge/bad.db"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "bad.db")
	writeFile(t, path, b)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("DELETE FROM experience_buffer WHERE id <> ?", id); err != nil {
		t.Fatal(err)
	}
	return sqliteURL(path, "experience_buffer")
}

// TestBadBlobs: each defective row of edge/bad.db stops the read with a bad
// input error (exit 2) naming the table, the row id and the field.
func TestBadBlobs(t *testing.T) {
	for _, tc := range []struct {
		id          int
		what, field string
		msg         string
	}{
		{1, "wrong magic", "experience_bytes", `magic "TRXQ", want "TRXP"`},
		{2, "unknown version", "experience_bytes", "unknown payload version 2"},
		{3, "truncated tensor block", "experience_bytes", "tensor block truncated"},
		{4, "metadata length past the blob", "experience_bytes", "metadata length 999 runs past the end of the 999-byte payload"},
		{5, "numpy scalar in metrics", "metrics", "pickle opcode STACK_GLOBAL"},
		{6, "two experiences in one payload", "experience_bytes", "payload holds 2 experiences"},
		{7, "gap between two tensors", "experience_bytes", "not contiguous"},
		{8, "NULL payload", "experience_bytes", "NULL payload"},
	} {
		t.Run(tc.what, func(t *testing.T) {
			err := readErr(onlyRow(t, tc.id))
			if err == nil {
				t.Fatal("read without error")
			}
			if !errors.Is(err, schema.ErrBadInput) {
				t.Errorf("not bad input (exit 2): %v", err)
			}
			var ie *schema.InputError
			if !errors.As(err, &ie) || ie.Column != tc.field {
				t.Errorf("error %q: want column %q", err, tc.field)
			}
			for _, w := range []string{"table experience_buffer, id " + string(rune('0'+tc.id)), tc.msg, "?table=experience_buffer: row 0: "} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
}

// TestBadMaskLength: row 9's action_mask is one longer than the response;
// upstream reads it, and the store's validation refuses it.
func TestBadMaskLength(t *testing.T) {
	r, err := store.Open(onlyRow(t, 9))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rec, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	file, row, _ := r.Pos()
	err = schema.Validate(file, row, rec, schema.ValidateOptions{})
	if err == nil || !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), "row 0") {
		t.Fatalf("got %v, want a row 0 validation error", err)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the only row: %v", err)
	}
}

// TestBadBufferValidRows: rows 10-12 of bad.db are valid.
func TestBadBufferValidRows(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(fixtures, "edge/bad.db"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "bad.db")
	writeFile(t, path, b)
	db, _ := sql.Open("sqlite", path)
	if _, err := db.Exec("DELETE FROM experience_buffer WHERE id < 10"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	r, err := store.Open(sqliteURL(path, "experience_buffer"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n := int64(0)
	if err := r.ForEach(context.Background(), func(rec arrow.Record) error {
		n += rec.NumRows()
		return schema.Validate("bad.db", 0, rec, schema.ValidateOptions{})
	}); err != nil || n != 3 {
		t.Fatalf("%d rows, %v; want 3 valid rows", n, err)
	}
}

func TestNotABuffer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	db, _ := sql.Open("sqlite", path)
	if _, err := db.Exec("CREATE TABLE t (a INTEGER)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for table, want := range map[string]string{"t": "not a Trinity-RFT buffer table", "u": "no such table"} {
		err := readErr(sqliteURL(path, table))
		if err == nil || !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), want) {
			t.Errorf("table %s: got %v, want %q", table, err, want)
		}
	}
	err := readErr(sqliteURL(filepath.Join(t.TempDir(), "none.db"), "t"))
	if err == nil || !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), "no such database file") {
		t.Errorf("missing file: got %v", err)
	}
}

// buffer06 writes the experience fixture into a new 0.5 or 0.6 buffer
// table of an SQLite file in dir and returns its URL.
func buffer06(t *testing.T, dir, table string, lay trinity.Layout) string {
	t.Helper()
	url := sqliteURL(filepath.Join(dir, "b.db"), table) + "&layout=" + string(lay)
	copyStore(t, filepath.Join(fixtures, "experience.jsonl"), url)
	return url
}

// rowCount counts the rows of an SQLite table.
func rowCount(t *testing.T, path, table string) int {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM "` + table + `"`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestNotIntoTableRead: a write into a table the read uses is refused
// (bad input) whatever the URL's spelling: SQLite names in another case,
// the file by another path, a symbolic or a hard link, the scheme in
// capitals, and a 0.6 buffer's <name>_blob table; the table keeps its rows.
func TestNotIntoTableRead(t *testing.T) {
	for _, lay := range []trinity.Layout{trinity.Layout05, trinity.Layout06} {
		t.Run(string(lay), func(t *testing.T) {
			dir := t.TempDir()
			in := buffer06(t, dir, "experience_buffer", lay)
			path := filepath.Join(dir, "b.db")
			if err := os.Symlink(path, filepath.Join(dir, "link.db")); err != nil {
				t.Fatal(err)
			}
			if err := os.Link(path, filepath.Join(dir, "hard.db")); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			want := rowCount(t, path, "experience_buffer")
			outs := []string{
				sqliteURL(path, "Experience_Buffer") + "&if_exists=append",
				sqliteURL(path, "EXPERIENCE_BUFFER") + "&if_exists=replace",
				"sqlite:///" + dir + "/./sub/../b.db?table=experience_buffer&if_exists=append",
				sqliteURL(filepath.Join(dir, "link.db"), "experience_buffer") + "&if_exists=append",
				sqliteURL(filepath.Join(dir, "hard.db"), "experience_buffer") + "&if_exists=append",
				"SQLite:///" + path + "?table=experience_buffer&if_exists=append",
				sqliteURL(path, "experience_buffer_blob") + "&if_exists=append",
			}
			for _, out := range outs {
				r := openStore(t, in)
				_, err := copyErr(r, out, in)
				r.Close()
				if err == nil || !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), "table being read") {
					t.Errorf("%s: got %v, want a refusal to write into the table being read", out, err)
				}
			}
			if got := rowCount(t, path, "experience_buffer"); got != want {
				t.Errorf("the table read holds %d rows, had %d", got, want)
			}
			// Another table of the same file is no table being read.
			r := openStore(t, in)
			defer r.Close()
			if _, err := copyErr(r, sqliteURL(path, "copy"), in); err != nil {
				t.Errorf("another table: %v", err)
			}
		})
	}
}

// TestConcurrentWriters: writers of one SQLite table run one after the
// other, each seeing what the one before committed. Into a new file, one
// of three concurrent writers wins and the others are refused (bad input,
// one line); three concurrent appends write three copies, three replaces
// one; a writer that fails (bad rows) beside a good one into a new file
// leaves the good one's table.
func TestConcurrentWriters(t *testing.T) {
	in := filepath.Join(fixtures, "experience.jsonl")
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	writeFile(t, bad, []byte(`{"eid":{"batch":0,"task":0,"run":0,"step":0,"suffix":"a"},"reward":1.0,"prompt_length":2,"tokens":[1,2,3],"logprobs":[-1]}
{"eid":{"batch":0,"task":1,"run":0,"step":0,"suffix":"b"},"reward":1.0,"prompt_length":3,"tokens":[1,2,3],"logprobs":[-1]}
`))
	n := int(readStoreRows(t, in))
	race := func(url string, ins ...string) []error {
		errs := make([]error, len(ins))
		var wg sync.WaitGroup
		for i, src := range ins {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := store.Open(src)
				if err != nil {
					errs[i] = err
					return
				}
				defer r.Close()
				_, errs[i] = store.Copy(context.Background(), r, url, func(rec arrow.Record) error {
					file, row, _ := r.Pos()
					return schema.Validate(file, row, rec, schema.ValidateOptions{})
				}, store.NotOver(src))
			}()
		}
		wg.Wait()
		return errs
	}
	for _, tc := range []struct {
		name, query string
		ins         []string
		wins, rows  int
	}{
		{"new table", "", []string{in, in, in}, 1, n},
		{"append", "&if_exists=append", []string{in, in, in}, 3, 3 * n},
		{"replace", "&if_exists=replace", []string{in, in, in}, 3, n},
		{"one bad", "", []string{bad, in, bad}, 1, n},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.db")
			wins := 0
			for _, err := range race(sqliteURL(path, "t")+tc.query, tc.ins...) {
				switch {
				case err == nil:
					wins++
				case !errors.Is(err, schema.ErrBadInput) || strings.Contains(err.Error(), "\n"):
					t.Errorf("a loser's error: %v", err)
				case tc.name == "new table" && !strings.Contains(err.Error(), "already holds 64 rows (add &if_exists=append"):
					t.Errorf("a loser's error: %v", err)
				}
			}
			if wins != tc.wins {
				t.Errorf("%d writers succeeded, want %d", wins, tc.wins)
			}
			if got := rowCount(t, path, "t"); got != tc.rows {
				t.Errorf("table t holds %d rows, want %d", got, tc.rows)
			}
		})
	}
}

func readStoreRows(t *testing.T, path string) int64 {
	t.Helper()
	r := openStore(t, path)
	defer r.Close()
	var n int64
	if err := r.ForEach(context.Background(), func(rec arrow.Record) error { n += rec.NumRows(); return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestReservedTableNames: tables named after SQL keywords are written and
// read back (quoted where SQLAlchemy quotes them).
func TestReservedTableNames(t *testing.T) {
	in := filepath.Join(fixtures, "experience.jsonl")
	want := readStore(t, in)
	for _, name := range []string{"select", "order", "user", "group", "Table", "from_"} {
		for _, lay := range []string{"0.5", "0.6"} {
			u := sqliteURL(filepath.Join(t.TempDir(), "r.db"), name) + "&layout=" + lay
			copyStore(t, in, u)
			sameRows(t, readStore(t, u), want)
		}
	}
}

// TestMissingColumns: a table with some of a kind's columns is told which
// of the others it lacks.
func TestMissingColumns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"CREATE TABLE noreward (id INTEGER PRIMARY KEY, task_id TEXT, run_id INTEGER, msg_id TEXT, model_version INTEGER, experience_bytes BLOB)",
		"CREATE TABLE noids (id INTEGER PRIMARY KEY, reward FLOAT, experience_bytes BLOB)",
		"CREATE TABLE halfdpo (id INTEGER PRIMARY KEY, chosen_message_list JSON, experience_bytes BLOB)",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	for table, want := range map[string]string{
		"noreward": "table noreward: no column reward (a Trinity-RFT experience table has task_id, run_id, msg_id, model_version, reward)",
		"noids":    "no column task_id, run_id, msg_id, model_version (a Trinity-RFT experience table",
		"halfdpo":  "no column rejected_message_list (a Trinity-RFT dpo table",
	} {
		err := readErr(sqliteURL(path, table))
		if err == nil || !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", table, err, want)
		}
		// and a write into it says the same
		r := openStore(t, filepath.Join(fixtures, "experience.jsonl"))
		_, err = copyErr(r, sqliteURL(path, table)+"&if_exists=append")
		r.Close()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("write into %s: got %v, want %q", table, err, want)
		}
	}
}

// TestSchemes: the scheme's case does not matter; an unknown scheme is
// named with the ones known (not "no such file").
func TestSchemes(t *testing.T) {
	path, err := filepath.Abs(filepath.Join(fixtures, "experience.db"))
	if err != nil {
		t.Fatal(err)
	}
	if n := readStoreRows(t, "SQLITE:///"+path+"?table=experience_buffer"); n != 64 {
		t.Errorf("SQLITE:// read %d rows", n)
	}
	for _, u := range []string{"mysql://u@h/db?table=t", "gs://bucket/x.parquet", "MySQL+pymysql://u@h/db?table=t"} {
		err := readErr(u)
		if err == nil || !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), "unknown scheme") ||
			!strings.Contains(err.Error(), "sqlite:///FILE?table=NAME or postgresql://") || strings.Contains(err.Error(), "no such file") {
			t.Errorf("%s: got %v", u, err)
		}
		r := openStore(t, filepath.Join(fixtures, "experience.jsonl"))
		_, err = copyErr(r, u)
		r.Close()
		if err == nil || !strings.Contains(err.Error(), "unknown scheme") {
			t.Errorf("write %s: got %v", u, err)
		}
	}
}
