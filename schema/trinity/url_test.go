package trinity

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
		{url: "postgresql://u:secret@db.example:5433/rft?table=exp&sslmode=disable", driver: "pgx", dsn: "postgresql://u:secret@db.example:5433/rft?sslmode=disable", table: "exp", ifExists: "error"},
		{url: "postgresql+psycopg2://u@h/rft?table=exp", driver: "pgx", dsn: "postgresql://u@h/rft", table: "exp", ifExists: "error"},
		{url: "postgres://u@h/rft?table=exp&if_exists=replace", driver: "pgx", dsn: "postgresql://u@h/rft", table: "exp", ifExists: "replace"},
		{url: "sqlite:///buf.db", errSubstr: "names no table"},
		{url: "sqlite:///buf.db?table=a%22b", errSubstr: "want letters, digits and underscores"},
		{url: "sqlite:///buf.db?table=t&schema_type=rl", errSubstr: "unknown schema_type"},
		{url: "sqlite:///buf.db?table=t&if_exists=maybe", errSubstr: "if_exists"},
		{url: "sqlite:///buf.db?table=t&mode=ro", errSubstr: "unknown parameter"},
		{url: "sqlite://buf.db?table=t", errSubstr: "want sqlite:///"},
		{url: "mysql://u@h/db?table=t", errSubstr: "unknown database scheme"},
	} {
		loc, err := ParseURL(tc.url)
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
	if !IsURL("postgresql+psycopg2://x") || IsURL("data.parquet") || IsURL("s3://bucket/x") {
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

func TestSameTable(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "b.db")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(f, filepath.Join(dir, "link.db")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"sqlite:///" + f + "?table=T", "sqlite:///" + dir + "/./b.db?table=T", true},
		{"sqlite:///" + f + "?table=T", "sqlite:///" + dir + "/link.db?table=T&if_exists=append", true},
		{"sqlite:///" + f + "?table=T", "sqlite:///" + f + "?table=U", false},
		{"postgresql://a@h/db?table=T", "postgresql://b:pw@h:5432/db?table=T", true},
		{"postgresql://a@h/db?table=T", "postgresql://a@h:5433/db?table=T", false},
		{"postgresql://a@h/db?table=T", "postgresql://a@h/other?table=T", false},
		{"postgresql://a@h/db?table=T", "sqlite:///db?table=T", false},
	} {
		if got := SameTable(tc.a, tc.b); got != tc.same {
			t.Errorf("SameTable(%s, %s) = %v", tc.a, tc.b, got)
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
