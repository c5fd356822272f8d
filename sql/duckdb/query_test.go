package duckdb

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/schema"
)

const demo = "../../fixtures/stores/demo.parquet"

func attached(t *testing.T, stores ...Store) *sql.DB {
	t.Helper()
	db, err := Open(Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := Attach(context.Background(), db, stores, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	return db
}

func count(t *testing.T, db *sql.DB, q string) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRow(q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func TestParseStore(t *testing.T) {
	for _, c := range []struct {
		arg  string
		want Store
	}{
		{"a.parquet", Store{Path: "a.parquet"}},
		{"base=a.parquet", Store{Name: "base", Path: "a.parquet"}},
		{"dir/x=1/part.parquet", Store{Path: "dir/x=1/part.parquet"}}, // not an identifier before =
	} {
		got, err := ParseStore(c.arg)
		if err != nil || got != c.want {
			t.Errorf("ParseStore(%q) = %+v, %v; want %+v", c.arg, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "name="} {
		if _, err := ParseStore(bad); !errors.Is(err, schema.ErrBadInput) {
			t.Errorf("ParseStore(%q): %v, want bad input", bad, err)
		}
	}
}

// Files, directories, globs and JSONL (converted) stores all become views;
// the first store is experiences and its own name too.
func TestAttach(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"a.parquet", "b.parquet"} {
		b, err := os.ReadFile(demo)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	db := attached(t,
		Store{Name: "base", Path: demo},
		Store{Name: "dir", Path: dir},
		Store{Name: "globbed", Path: filepath.Join(dir, "*.parquet")},
		Store{Name: "js", Path: "../../fixtures/stores/demo.jsonl"},
	)
	for q, want := range map[string]int64{
		"SELECT count(*) FROM experiences": 384,
		"SELECT count(*) FROM base":        384,
		"SELECT count(*) FROM dir":         768,
		"SELECT count(*) FROM globbed":     768,
		"SELECT count(*) FROM js":          384,
		"SELECT count(*) FROM Base":        384, // identifiers are case-insensitive
		// The JSONL store holds the same experiences.
		"SELECT count(*) FROM js JOIN base USING (batch, task, run, step) WHERE js.reward = base.reward AND js.tokens = base.tokens": 384,
	} {
		if got := count(t, db, q); got != want {
			t.Errorf("%s = %d, want %d", q, got, want)
		}
	}

	for _, c := range []struct {
		stores []Store
		want   string
	}{
		{[]Store{{Path: demo}, {Path: demo}}, "only the first store"},
		{[]Store{{Path: demo}, {Name: "experiences", Path: demo}}, "the view name experiences is taken"},
		{[]Store{{Path: demo}, {Name: "Experiences", Path: demo}}, "the view name Experiences is taken, as experiences (view names are case-insensitive)"},
		{[]Store{{Name: "base", Path: demo}, {Name: "BASE", Path: demo}}, "the view name BASE is taken, as base"},
		{[]Store{{Name: "EXPERIENCES", Path: demo}, {Name: "Experiences", Path: demo}}, "taken, as EXPERIENCES"},
		{[]Store{{Path: filepath.Join(dir, "missing.parquet")}}, "no such file"},
		{[]Store{{Path: "../../fixtures/stores/demo.jsonl.nope"}}, "no such file"},
	} {
		db, _ := Open(Options{Threads: 1})
		_, err := Attach(context.Background(), db, c.stores, t.TempDir())
		db.Close()
		if !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Attach(%v): %v, want bad input with %q", c.stores, err, c.want)
		}
	}
}

func TestQueryErrorPosition(t *testing.T) {
	db := attached(t, Store{Path: demo})
	ctx := context.Background()
	for _, c := range []struct {
		query        string
		msg          string
		line, column int
		caret        string // the query line and the caret under the position
	}{
		{"SELECT * FORM experiences", `Parser Error: syntax error at or near "experiences"`, 1, 15,
			"LINE 1: SELECT * FORM experiences\n                      ^"},
		{"SELECT task,\n  nope FROM experiences", `Binder Error: Referenced column "nope" not found`, 2, 3,
			"LINE 2:   nope FROM experiences\n          ^"},
		{"SELECT count(*)\nFROM experiences\nWHERE reward > 1 AND batch = 2 AND task = 3 AND run = 4 AND bogus_column = 5", `Binder Error: Referenced column "bogus_column"`, 3, 61,
			"LINE 3: WHERE reward > 1 AND batch = 2 AND task = 3 AND run = 4 AND bogus_column = 5\n" + strings.Repeat(" ", 68) + "^"},
	} {
		_, err := Write(ctx, db, c.query, Table, &bytes.Buffer{})
		var qe *QueryError
		if !errors.As(err, &qe) || !errors.Is(err, schema.ErrBadInput) {
			t.Fatalf("%q: %v, want a *QueryError that is bad input", c.query, err)
		}
		if !strings.HasPrefix(qe.Msg, c.msg) || qe.Line != c.line || qe.Column != c.column {
			t.Errorf("%q: %q at %d:%d; want %q at %d:%d", c.query, qe.Msg, qe.Line, qe.Column, c.msg, c.line, c.column)
		}
		if !strings.Contains(qe.Error(), "(line ") || strings.Contains(qe.Error(), "\n") {
			t.Errorf("Error() = %q, want one line with the position", qe.Error())
		}
		if c.caret != "" && !strings.Contains(qe.Detail(), c.caret) {
			t.Errorf("Detail() = %q, want it to show\n%s", qe.Detail(), c.caret)
		}
	}
}

func TestWriteFormats(t *testing.T) {
	db := attached(t, Store{Path: demo})
	ctx := context.Background()
	q := "SELECT task, count(*) AS n, avg(reward) AS mean, NULL AS nothing, 'x' AS s, [1.5, 'NaN'::DOUBLE] AS l FROM experiences WHERE batch = 0 GROUP BY task ORDER BY task"

	var tbl bytes.Buffer
	n, err := Write(ctx, db, q, Table, &tbl)
	if err != nil || n != 16 {
		t.Fatalf("table: %d rows, %v", n, err)
	}
	lines := strings.Split(strings.TrimSpace(tbl.String()), "\n")
	if len(lines) != 18 || !strings.HasPrefix(lines[0], "task  ") || !strings.HasPrefix(lines[1], "----") {
		t.Fatalf("table:\n%s", tbl.String())
	}
	if !strings.Contains(lines[2], "NULL") || !strings.Contains(lines[2], "[1.5,null]") {
		t.Errorf("table row: %q", lines[2])
	}

	var c bytes.Buffer
	if _, err := Write(ctx, db, q, CSV, &c); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&c).ReadAll()
	if err != nil || len(recs) != 17 || strings.Join(recs[0], ",") != "task,n,mean,nothing,s,l" || recs[1][3] != "" {
		t.Fatalf("csv: %v %v", recs, err)
	}

	var j bytes.Buffer
	if _, err := Write(ctx, db, q, JSON, &j); err != nil {
		t.Fatal(err)
	}
	var objs []map[string]any
	if err := json.Unmarshal(j.Bytes(), &objs); err != nil || len(objs) != 16 {
		t.Fatalf("json: %v\n%s", err, j.String())
	}
	if objs[0]["n"] != float64(8) || objs[0]["nothing"] != nil || objs[0]["s"] != "x" {
		t.Errorf("json row: %v", objs[0])
	}
	if !strings.HasPrefix(j.String(), "[\n{\"task\":0,\"n\":8,") {
		t.Errorf("json keeps the column order: %s", j.String()[:40])
	}
}

// TestTableEscapesControl: a table, read on a terminal, shows the control
// characters of a store's text (and of its column names) escaped, never
// raw; CSV and JSON keep the values as they are.
func TestTableEscapesControl(t *testing.T) {
	db := attached(t, Store{Path: demo})
	for _, c := range []struct{ expr, want string }{
		{"chr(27) || '[2J' || chr(27) || ']0;title' || chr(7)", `\x1b[2J\x1b]0;title\x07`},
		{"'a' || chr(10) || 'b' || chr(13) || chr(9) || chr(0) || chr(127)", `a\x0ab\x0d\x09\x00\x7f`},
		{"chr(155) || '31m' || chr(133)", `\u009b31m\u0085`}, // C1: CSI, NEL
		{"'é ✓ \\x1b ' || chr(160)", "é ✓ \\x1b \u00a0"},
		{"[chr(27), chr(155)]", `["\u001b","\u009b"]`},
	} {
		var b bytes.Buffer
		if _, err := Write(t.Context(), db, "SELECT "+c.expr+" AS \"s\x1b[8m\"", Table, &b); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(b.String(), "\n")
		if len(lines) != 4 || lines[0] != `s\x1b[8m` || lines[2] != c.want {
			t.Errorf("%s: table\n%q, want the cell %q under the header %q", c.expr, b.String(), c.want, `s\x1b[8m`)
		}
		b.Reset()
		if _, err := Write(t.Context(), db, "SELECT "+c.expr+" AS s", CSV, &b); err != nil || !strings.ContainsAny(b.String(), "\x1b\x00\u009b\u00a0") {
			t.Errorf("%s: csv %q, %v: want the characters as they are", c.expr, b.String(), err)
		}
	}
	for in, want := range map[string]string{"\xff\x1bok": `\xff\x1bok`, "\xc2\x9b": `\u009b`, "\xc2": `\xc2`, "plain": "plain"} {
		if got := escapeControl(in); got != want {
			t.Errorf("escapeControl(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCopyParquetAtomic(t *testing.T) {
	db := attached(t, Store{Path: demo})
	ctx := context.Background()
	out := filepath.Join(t.TempDir(), "tasks.parquet")
	n, err := CopyParquet(ctx, db, "SELECT batch, task, avg(reward) AS r FROM experiences GROUP BY ALL;", out)
	if err != nil || n != 48 {
		t.Fatalf("CopyParquet: %d, %v", n, err)
	}
	if got := count(t, db, "SELECT count(*) FROM read_parquet("+QuoteString(out)+")"); got != 48 {
		t.Errorf("read back %d rows", got)
	}
	// A failing query leaves neither out nor a temp file behind.
	bad := filepath.Join(filepath.Dir(out), "bad.parquet")
	_, err = CopyParquet(ctx, db, "SELECT nope FROM experiences", bad)
	var qe *QueryError
	if !errors.As(err, &qe) || qe.Line != 1 {
		t.Errorf("bad query: %v", err)
	}
	_, err = CopyParquet(ctx, db, "SELECT 1\nFROM experiences\nWHERE WHERE", bad)
	if !errors.As(err, &qe) || qe.Line != 3 || qe.Column != 7 || !strings.HasSuffix(qe.Detail(), "LINE 3: WHERE WHERE\n              ^") {
		t.Errorf("parser error in COPY: %v\n%s", err, qe.Detail())
	}
	entries, _ := os.ReadDir(filepath.Dir(out))
	if len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
}

func TestCaretContextCutsLongLines(t *testing.T) {
	q := "SELECT " + strings.Repeat("a + ", 50) + "oops" + strings.Repeat(" + b", 50)
	col := strings.Index(q, "oops") + 1
	got := caretContext(q, 1, col)
	lines := strings.Split(got, "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "LINE 1: ...") || !strings.HasSuffix(lines[0], "...") {
		t.Fatalf("context:\n%s", got)
	}
	if caret := strings.Index(lines[1], "^"); !strings.HasPrefix(lines[0][caret:], "oops") {
		t.Errorf("caret not under the position:\n%s", got)
	}
}

func TestLiteral(t *testing.T) {
	for in, want := range map[string]string{
		"1": "1", "0.25": "0.25", "-3e2": "-3e2", "null": "NULL", "True": "TRUE",
		"abc": "'abc'", "it's": "'it''s'", "NaN": "'NaN'", "0x10": "'0x10'",
	} {
		if got := Literal(in); got != want {
			t.Errorf("Literal(%q) = %s, want %s", in, got, want)
		}
	}
}
