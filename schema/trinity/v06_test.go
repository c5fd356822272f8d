package trinity_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/schema/trinity"
)

const fixtures06 = fixtures + "/v0.6"

// The 0.6 buffers written by upstream's own code (fixtures/trinity/v0.6).
var buffers06 = []struct {
	name, table string
	kind        trinity.Kind
	rows        int
}{
	{"experience", "experience_buffer", trinity.KindExperience, 64},
	{"multistep", "experience_buffer", trinity.KindExperience, 48},
	{"dpo", "dpo_buffer", trinity.KindDPO, 16},
	{"sft", "sft_buffer", trinity.KindSFT, 16},
}

// TestImportFixtures06: every 0.6 sample gives its companion JSONL, value
// for value and, written as JSONL with the companion's columns, byte for
// byte; the layout is found from the tables.
func TestImportFixtures06(t *testing.T) {
	for _, b := range buffers06 {
		t.Run(b.name, func(t *testing.T) {
			jsonl := filepath.Join(fixtures06, b.name+".jsonl")
			url := sqliteURL(filepath.Join(fixtures06, b.name+".db"), b.table)
			want := readStore(t, jsonl)
			got := readStore(t, url, store.BatchRows(5))
			if len(got.rows) != b.rows {
				t.Fatalf("%d rows, want %d", len(got.rows), b.rows)
			}
			sameRows(t, got, want)
			r, err := trinity.Open(url, trinity.ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if r.Layout() != trinity.Layout06 || r.Kind() != b.kind {
				t.Errorf("layout %s kind %s, want 0.6 %s", r.Layout(), r.Kind(), b.kind)
			}
			r.Close()
			sameBytes(t, url, jsonl, want)
		})
	}
}

// sameBytes converts a buffer to JSONL with the companion's columns and
// compares the bytes.
func sameBytes(t *testing.T, url, jsonl string, want table) {
	t.Helper()
	var cols []string
	for _, f := range want.schema.Fields() {
		cols = append(cols, f.Name)
	}
	r, err := store.Open(url, store.Columns(cols...))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	out := filepath.Join(t.TempDir(), "out.jsonl")
	if _, err := store.Copy(context.Background(), r, out, nil); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(out)
	exp, _ := os.ReadFile(jsonl)
	if !bytes.Equal(got, exp) {
		t.Errorf("JSONL of %s differs from %s", url, jsonl)
	}
}

// TestOrphans: edge/orphans.db's metadata id 7 has no blob row and blob id
// 19 no metadata row.
func TestOrphans(t *testing.T) {
	db := filepath.Join(fixtures06, "edge/orphans.db")
	err := readErr(sqliteURL(db, "experience_buffer"))
	if err == nil || !errors.Is(err, schema.ErrBadInput) {
		t.Fatalf("got %v, want a bad input error (exit 2)", err)
	}
	for _, w := range []string{"table experience_buffer", "1 metadata row(s) without a blob row in experience_buffer_blob: id 7", "on_missing_blob=skip"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	url := sqliteURL(db, "experience_buffer") + "&on_missing_blob=skip"
	sameRows(t, readStore(t, url), readStore(t, filepath.Join(fixtures06, "edge/orphans.jsonl")))
	r := openStore(t, url)
	defer r.Close()
	if err := r.ForEach(context.Background(), func(_ arrow.Record) error { return nil }); err != nil {
		t.Fatal(err)
	}
	w := strings.Join(r.Warnings(), "\n")
	for _, s := range []string{"skipped 1 metadata row(s) without a blob row in experience_buffer_blob (on_missing_blob=skip): id 7", "table experience_buffer_blob: 1 blob row(s) without a metadata row in experience_buffer, not read: id 19"} {
		if !strings.Contains(w, s) {
			t.Errorf("warnings %q lack %q", w, s)
		}
	}
	if c := r.Counts(); c["trinity/missing_blob_skipped"] != 1 || c["trinity/orphan_blobs"] != 1 {
		t.Errorf("counts %v", c)
	}
}

// TestMixedTable: a 0.5 table into which 0.6 wrote (inline payloads on the
// old rows, blob rows for the new ones) reads every row; a row with a
// payload in both places is refused; a row with neither is a missing blob.
func TestMixedTable(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mixed.db")
	url := sqliteURL(path, "T")
	copyStore(t, filepath.Join(fixtures, "experience.jsonl"), url) // 64 rows, 0.5
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Rows 33-64 move their payload to T_blob, as 0.6 writes them.
	for _, q := range []string{
		"CREATE TABLE T_blob (id INTEGER NOT NULL, experience_bytes BLOB NOT NULL, PRIMARY KEY (id))",
		"INSERT INTO T_blob SELECT id, experience_bytes FROM T WHERE id > 32",
		"UPDATE T SET experience_bytes = NULL WHERE id > 32",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	want := readStore(t, filepath.Join(fixtures, "experience.jsonl"))
	sameRows(t, readStore(t, url, store.BatchRows(7)), want)
	r, err := trinity.Open(url, trinity.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Layout() != trinity.LayoutMixed {
		t.Errorf("layout %s, want mixed", r.Layout())
	}
	r.Close()

	if _, err := db.Exec("INSERT INTO T_blob SELECT id, experience_bytes FROM T WHERE id = 5"); err != nil {
		t.Fatal(err)
	}
	if err := readErr(url); err == nil || !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), "id 5 has a payload in both T.experience_bytes and T_blob") {
		t.Errorf("payload in both: got %v", err)
	}
	if _, err := db.Exec("DELETE FROM T_blob WHERE id IN (5, 40)"); err != nil {
		t.Fatal(err)
	}
	if err := readErr(url); err == nil || !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), "without a blob row in T_blob: id 40") {
		t.Errorf("neither: got %v", err)
	}
	if got := readStore(t, url+"&on_missing_blob=skip"); len(got.rows) != 63 {
		t.Errorf("skip: %d rows, want 63", len(got.rows))
	}
}

// schemaSQL returns sqlite_master's statements of a database, sorted by
// table then name, without the table names themselves.
func schemaSQL(t *testing.T, path string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY type DESC, name")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// TestWrite06: &layout=0.6 writes upstream's two tables with its DDL and
// indexes, ids paired, consumed 0; the rows read back unchanged; a store
// read from a 0.6 buffer is written in 0.6 without being told.
func TestWrite06(t *testing.T) {
	for _, b := range buffers06 {
		t.Run(b.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "b.db")
			url := sqliteURL(path, b.table) + "&layout=0.6&schema_type=" + string(b.kind)
			jsonl := filepath.Join(fixtures06, b.name+".jsonl")
			copyStore(t, jsonl, url)
			want := schemaSQL(t, filepath.Join(fixtures06, b.name+".db"))
			if got := schemaSQL(t, path); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("DDL\n got %q\nwant %q", got, want)
			}
			db, _ := sql.Open("sqlite", path)
			defer db.Close()
			var unpaired, notZero int
			db.QueryRow("SELECT count(*) FROM " + b.table + " m FULL JOIN " + b.table + "_blob x ON x.id = m.id WHERE m.id IS NULL OR x.id IS NULL").Scan(&unpaired)
			if b.kind == trinity.KindExperience {
				db.QueryRow("SELECT count(*) FROM " + b.table + " WHERE consumed IS NOT 0").Scan(&notZero)
			}
			if unpaired != 0 || notZero != 0 {
				t.Errorf("%d unpaired ids, %d rows with consumed != 0", unpaired, notZero)
			}
			sameRows(t, readStore(t, sqliteURL(path, b.table)), readStore(t, jsonl))
			// buffer → buffer keeps the layout
			again := filepath.Join(dir, "again.db")
			copyStore(t, sqliteURL(path, b.table), sqliteURL(again, b.table))
			if got := schemaSQL(t, again); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("layout not kept: %q", got)
			}
		})
	}
}

// TestLayoutRefusals: a layout the existing tables do not have is refused.
func TestLayoutRefusals(t *testing.T) {
	dir := t.TempDir()
	url := sqliteURL(filepath.Join(dir, "b.db"), "T")
	copyStore(t, filepath.Join(fixtures, "overrides.jsonl"), url)
	r := openStore(t, filepath.Join(fixtures, "overrides.jsonl"))
	defer r.Close()
	if _, err := copyErr(r, url+"&layout=0.6&if_exists=append"); err == nil || !strings.Contains(err.Error(), "layout=0.6, but the table has the 0.5 layout") {
		t.Errorf("got %v", err)
	}
	if err := readErr(url + "&layout=0.6"); err == nil || !strings.Contains(err.Error(), "layout=0.6, but the table has the 0.5 layout") {
		t.Errorf("got %v", err)
	}
	if _, err := trinity.ParseURL(url + "&layout=0.7"); err == nil {
		t.Error("layout=0.7 parsed")
	}
	if _, err := trinity.ParseURL(url + "&on_missing_blob=drop"); err == nil {
		t.Error("on_missing_blob=drop parsed")
	}
}

// TestPostgres06: the 0.6 layout through PostgreSQL: write, read back, an
// orphan metadata row refused and skipped.
func TestPostgres06(t *testing.T) {
	for _, b := range buffers06 {
		t.Run(b.name, func(t *testing.T) {
			jsonl := filepath.Join(fixtures06, b.name+".jsonl")
			url := pgURL(t, "v06_"+b.name) + "&layout=0.6&schema_type=" + string(b.kind)
			copyStore(t, jsonl, url)
			sameRows(t, readStore(t, url, storeBatch(7)), readStore(t, jsonl))
			lite := sqliteURL(filepath.Join(t.TempDir(), "b.db"), "T")
			copyStore(t, url, lite)
			sameRows(t, readStore(t, lite), readStore(t, jsonl))
		})
	}
	url := pgURL(t, "v06_orphans")
	copyStore(t, filepath.Join(fixtures06, "edge/orphans.jsonl"), url+"&layout=0.6")
	db, err := sql.Open("pgx", strings.Split(url, "&table=")[0])
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("DELETE FROM v06_orphans_blob WHERE id = 3"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("DELETE FROM v06_orphans WHERE id = 9"); err != nil {
		t.Fatal(err)
	}
	if err := readErr(url); err == nil || !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), "without a blob row in v06_orphans_blob: id 3") {
		t.Errorf("got %v", err)
	}
	r := openStore(t, url+"&on_missing_blob=skip")
	defer r.Close()
	n := 0
	if err := r.ForEach(context.Background(), func(rec arrow.Record) error { n += int(rec.NumRows()); return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 20 || !strings.Contains(strings.Join(r.Warnings(), "\n"), "blob row(s) without a metadata row in v06_orphans, not read: id 9") {
		t.Errorf("%d rows, warnings %q", n, r.Warnings())
	}
}

// TestMaxExpSize: writing the 0.6 layout refuses a row whose payload is over
// upstream's limit (TRINITY_MAX_EXP_SIZE, 32 MiB by default), naming the row
// and its size, and commits nothing; a payload of exactly the limit is kept.
// The limit is lowered to the sample's largest payload, so that no test row
// needs 32 MiB.
func TestMaxExpSize(t *testing.T) {
	t.Setenv(trinity.MaxExpSizeEnv, "")
	os.Unsetenv(trinity.MaxExpSizeEnv)
	if n, err := trinity.MaxExpSize(); n != 32*1024*1024 || err != nil {
		t.Errorf("default: %d, %v; want 33554432 bytes", n, err)
	}
	for v, want := range map[string]int64{"0": 0, "-1": 0, " 1024 ": 1024} {
		t.Setenv(trinity.MaxExpSizeEnv, v)
		if n, err := trinity.MaxExpSize(); n != want || err != nil {
			t.Errorf("%s=%q: %d, %v; want %d", trinity.MaxExpSizeEnv, v, n, err, want)
		}
	}
	t.Setenv(trinity.MaxExpSizeEnv, "32MiB")
	if _, err := trinity.MaxExpSize(); err == nil || !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), "TRINITY_MAX_EXP_SIZE") {
		t.Errorf("32MiB: %v", err)
	}

	// The sample's largest payload, written without a limit.
	dir := t.TempDir()
	jsonl := filepath.Join(fixtures06, "experience.jsonl")
	t.Setenv(trinity.MaxExpSizeEnv, "0")
	path := filepath.Join(dir, "all.db")
	copyStore(t, jsonl, sqliteURL(path, "T")+"&layout=0.6")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	var id, size int64
	err = db.QueryRow("SELECT id, length(experience_bytes) FROM T_blob ORDER BY length(experience_bytes) DESC, id LIMIT 1").Scan(&id, &size)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}

	t.Setenv(trinity.MaxExpSizeEnv, fmt.Sprint(size))
	kept := filepath.Join(dir, "kept.db")
	if n := copyStore(t, jsonl, sqliteURL(kept, "T")+"&layout=0.6"); n != 64 {
		t.Errorf("at the limit: %d rows written, want 64", n)
	}
	sameRows(t, readStore(t, sqliteURL(kept, "T")), readStore(t, jsonl))
	// 0.5 has no limit
	copyStore(t, jsonl, sqliteURL(filepath.Join(dir, "v05.db"), "T")+"&layout=0.5")

	t.Setenv(trinity.MaxExpSizeEnv, fmt.Sprint(size-1))
	refused := filepath.Join(dir, "refused.db")
	r := openStore(t, jsonl)
	defer r.Close()
	_, err = copyErr(r, sqliteURL(refused, "T")+"&layout=0.6")
	want := fmt.Sprintf("row %d: cannot write into experience table T: a payload of %d bytes, over Trinity 0.6's limit of %d (TRINITY_MAX_EXP_SIZE;", id-1, size, size-1)
	if err == nil || !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("over the limit: %v\nwant one line with %q", err, want)
	}
	if _, err := os.Stat(refused); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused write left %s: %v", refused, err)
	}
}
