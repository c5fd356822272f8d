package trinity

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"

	"github.com/rftpipe/rftpipe/schema"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		url                 string
		driver, dsn, table  string
		kind                Kind
		ifExists, errSubstr string
	}{
		{url: "sqlite:///buf.db?table=exp", driver: "sqlite", dsn: "buf.db", table: "exp", ifExists: "error"},
		{url: "sqlite:////tmp/a b/buf.db?table=T&schema_type=sft&if_exists=append", driver: "sqlite", dsn: "/tmp/a b/buf.db", table: "T", kind: KindSFT, ifExists: "append"},
		{url: "postgresql://u:secret@db.example:5433/rft?table=exp&sslmode=disable", driver: "pgx", dsn: "postgresql://u:secret@db.example:5433/rft?connect_timeout=10&sslmode=disable", table: "exp", ifExists: "error"},
		{url: "postgresql+psycopg2://u@h/rft?table=exp", driver: "pgx", dsn: "postgresql://u@h/rft?connect_timeout=10", table: "exp", ifExists: "error"},
		{url: "postgres://u@h/rft?table=exp&if_exists=replace", driver: "pgx", dsn: "postgresql://u@h/rft?connect_timeout=10", table: "exp", ifExists: "replace"},
		{url: "sqlite:///buf.db", errSubstr: "names no table"},
		{url: "sqlite:///buf.db?table=a%22b", errSubstr: "want letters, digits and underscores"},
		{url: "sqlite:///buf.db?table=t&schema_type=rl", errSubstr: "unknown schema_type"},
		{url: "sqlite:///buf.db?table=t&if_exists=maybe", errSubstr: "if_exists"},
		{url: "sqlite:///buf.db?table=t&mode=ro", errSubstr: "unknown parameter"},
		{url: "sqlite://buf.db?table=t", errSubstr: "want sqlite:///"},
		{url: "mysql://u@h/db?table=t", errSubstr: "unknown scheme mysql:// (a store is a file, a directory, a glob, or a buffer URL: sqlite:///"},
		{url: "s3://bucket/x.parquet", errSubstr: "unknown scheme s3://"},
		{url: "SQLITE:///buf.db?table=exp", driver: "sqlite", dsn: "buf.db", table: "exp", ifExists: "error"},
		{url: "PostgreSQL+Psycopg2://u@h/rft?table=exp", driver: "pgx", dsn: "postgresql://u@h/rft?connect_timeout=10", table: "exp", ifExists: "error"},
		{url: "postgresql://u@h/rft?table=exp&connect_timeout=3", driver: "pgx", dsn: "postgresql://u@h/rft?connect_timeout=3", table: "exp", ifExists: "error"},
		{url: "postgresql://u@h/rft?table=exp&connect_timeout=soon", errSubstr: `connect_timeout="soon": want whole seconds`},
		{url: "postgresql://u@h/rft?table=exp&connect_timeout=-1", errSubstr: "want whole seconds"},
		{url: "postgresql://u:s3cr3t@h:x/rft?table=exp", errSubstr: `bad URL: invalid port ":x" after host`},
		{url: "postgresql://u:s3cr3t@h/rft?table=select", driver: "pgx", dsn: "postgresql://u:s3cr3t@h/rft?connect_timeout=10", table: "select", ifExists: "error"},
	} {
		loc, err := ParseURL(tc.url)
		if err != nil && strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%s: error shows the password: %v", tc.url, err)
		}
		if tc.errSubstr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errSubstr) || !errors.Is(err, schema.ErrBadInput) {
				t.Errorf("%s: got %v, want a bad input error with %q", tc.url, err, tc.errSubstr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		if loc.Driver != tc.driver || loc.DSN != tc.dsn || loc.Table != tc.table || loc.Kind != tc.kind || loc.IfExists != tc.ifExists {
			t.Errorf("%s: got %+v", tc.url, loc)
		}
	}
	if !IsURL("postgresql+psycopg2://x") || !IsURL("SQLITE:///x") || !IsURL("mysql://x") || IsURL("data.parquet") || IsURL("dir/x://y") {
		t.Error("IsURL")
	}
}

func TestRedact(t *testing.T) {
	loc, err := ParseURL("postgresql://u:secret@h:5432/db?table=t")
	if err != nil {
		t.Fatal(err)
	}
	if s := loc.String(); strings.Contains(s, "secret") || !strings.Contains(s, "u:xxxxx@h:5432") {
		t.Errorf("redacted URL %q", s)
	}
}

// TestSameTable: SQLite tables are compared by file identity and by name
// as SQLite resolves it (ASCII case-insensitive), <name>_blob included.
// The PostgreSQL cases are TestPostgresSameTable's.
func TestSameTable(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "b.db")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(f, filepath.Join(dir, "link.db")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(f, filepath.Join(dir, "hard.db")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "other.db"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	rel, err := filepath.Rel(wd, f)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"sqlite:///" + f + "?table=T", "sqlite:///" + dir + "/./b.db?table=T", true},
		{"sqlite:///" + f + "?table=T", "sqlite:///" + dir + "/sub/../b.db?table=T", true},
		{"sqlite:///" + f + "?table=T", "sqlite:///" + rel + "?table=T", true},
		{"sqlite:///" + f + "?table=T", "sqlite:///" + dir + "/link.db?table=T&if_exists=append", true},
		{"sqlite:///" + f + "?table=T", "sqlite:///" + dir + "/hard.db?table=T", true},
		{"sqlite:///" + f + "?table=experience_buffer", "sqlite:///" + f + "?table=Experience_Buffer&if_exists=append", true},
		{"SQLITE:///" + f + "?table=t", "sqlite:///" + f + "?table=T", true},
		{"sqlite:///" + f + "?table=t_blob", "sqlite:///" + f + "?table=T", true},
		{"sqlite:///" + f + "?table=t", "sqlite:///" + f + "?table=T_BLOB", true},
		{"sqlite:///" + f + "?table=T", "sqlite:///" + f + "?table=U", false},
		{"sqlite:///" + f + "?table=T", "sqlite:///" + dir + "/other.db?table=T", false},
		{"sqlite:///" + f + "?table=T", "sqlite:///" + dir + "/missing.db?table=T", false},
		{"postgresql://a@h/db?table=T", "sqlite:///" + f + "?table=T", false},
	} {
		for _, ab := range [][2]string{{tc.a, tc.b}, {tc.b, tc.a}} {
			if got, err := SameTable(context.Background(), ab[0], ab[1]); got != tc.same || err != nil {
				t.Errorf("SameTable(%s, %s) = %v, %v", ab[0], ab[1], got, err)
			}
		}
	}
}

func TestBufferURL(t *testing.T) {
	abs, _ := filepath.Abs("rel/buf.db")
	for _, tc := range []struct {
		path, storage, name, cache string
		want, errSubstr            string
	}{
		{path: "sqlite:///buffer.db", storage: "sql", name: "exp", want: "sqlite:///buffer.db?table=exp"},
		{path: "sqlite:////abs/buffer.db", storage: "queue", name: "exp", want: "sqlite:////abs/buffer.db?table=exp"},
		{path: "postgresql://u@h/db?sslmode=disable", storage: "SQL", name: "exp", want: "postgresql://u@h/db?sslmode=disable&table=exp"},
		{path: "", storage: "sql", name: "exp", cache: "/cache", want: "sqlite:////cache/exp.db?table=exp"},
		{path: "rel/buf.db", storage: "sql", name: "exp", want: "sqlite:///" + abs + "?table=exp"},
		{path: "", storage: "sql", name: "exp", errSubstr: "no path and no buffer.cache_dir"},
		{path: "", storage: "queue", name: "exp", errSubstr: "keeps no record"},
		{path: "", storage: "", name: "exp", errSubstr: "keeps no record"},
		{path: "buf.jsonl", storage: "file", name: "exp", errSubstr: "storage_type"},
		{path: "tasks/", storage: "task_dir", name: "exp", errSubstr: "task_dir is a directory of task files, not experiences"},
		{path: "sqlite:///b.db", storage: "sql", name: "", errSubstr: "no name"},
		{path: "sqlite:///b.db", storage: "sql", name: "bad-name", errSubstr: "want letters"},
	} {
		got, err := BufferURL(tc.path, tc.storage, tc.name, tc.cache)
		if tc.errSubstr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errSubstr) || !errors.Is(err, schema.ErrBadInput) {
				t.Errorf("%+v: got %q, %v; want an error with %q", tc, got, err, tc.errSubstr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%+v: got %q, %v; want %q", tc, got, err, tc.want)
		}
	}
}

// TestKindOf: the schema type a store's rows get in a new table: the
// metadata's, but dpo only for rows with chosen and rejected; else dpo for
// such rows, else experience.
func TestKindOf(t *testing.T) {
	plain := []arrow.Field{{Name: schema.Reward, Type: arrow.PrimitiveTypes.Float64}}
	pairs := append(plain, arrow.Field{Name: schema.Chosen, Type: arrow.BinaryTypes.String},
		arrow.Field{Name: schema.Rejected, Type: arrow.BinaryTypes.String})
	for _, tc := range []struct {
		fields []arrow.Field
		meta   string // schema_type; "" for none
		want   Kind
	}{
		{plain, "", KindExperience},
		{pairs, "", KindDPO},
		{plain, "sft", KindSFT},
		{pairs, "sft", KindSFT},
		{plain, "dpo", KindExperience},
		{pairs, "dpo", KindDPO},
		{pairs, "experience", KindExperience},
		{plain, "rows", KindExperience},
	} {
		var md *arrow.Metadata
		if tc.meta != "" {
			m := arrow.NewMetadata([]string{MetaSchemaType}, []string{tc.meta})
			md = &m
		}
		if got := KindOf(arrow.NewSchema(tc.fields, md)); got != tc.want {
			t.Errorf("%d columns, schema_type %q: %s, want %s", len(tc.fields), tc.meta, got, tc.want)
		}
	}
}
