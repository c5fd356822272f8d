package feed

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/rftpipe/rftpipe/schema/table/catalog"
)

// TestCatalogFollowsCommits ingests and compacts with --catalog: after
// each, the catalog's row names the table's newest Iceberg metadata
// version, the one before it as previous; an ingest with nothing new
// leaves it.
func TestCatalogFollowsCommits(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	tbl := filepath.Join(dir, "exp")
	db := filepath.Join(dir, "catalog.db")
	cat, err := CatalogTarget("sqlite:"+db, "rl", "", tbl)
	if err != nil {
		t.Fatal(err)
	}
	if cat.Namespace != "default" || cat.Table != "exp" {
		t.Fatalf("default identifier %s.%s, want default.exp", cat.Namespace, cat.Table)
	}
	src := filepath.Join(dir, "a.jsonl")
	meta := func(n int) string {
		abs, _ := filepath.Abs(tbl)
		return fmt.Sprintf("file://%s/metadata/v%d.metadata.json", abs, n)
	}
	for i, c := range []struct {
		do         func() error
		want, prev string
	}{
		{func() error { return ingestRows(ctx, src, tbl, cat, 0, 2) }, meta(1), ""},
		{func() error { return ingestRows(ctx, src, tbl, cat, 2, 3) }, meta(2), meta(1)},
		{func() error { return ingestRows(ctx, src, tbl, cat, 5, 0) }, meta(2), meta(1)},
		{func() error { _, err := Compact(ctx, tbl, 100, time.Time{}, "", cat); return err }, meta(3), meta(2)},
	} {
		if err := c.do(); err != nil {
			t.Fatalf("step %d: %v", i+1, err)
		}
		conn, err := sql.Open("sqlite", db)
		if err != nil {
			t.Fatal(err)
		}
		var loc string
		var prev sql.NullString
		err = conn.QueryRow(`SELECT metadata_location, previous_metadata_location FROM iceberg_tables
			WHERE catalog_name = 'rl' AND table_namespace = 'default' AND table_name = 'exp'`).Scan(&loc, &prev)
		conn.Close()
		if err != nil || loc != c.want || prev.String != c.prev {
			t.Fatalf("step %d: catalog row %q (previous %q) %v, want %s (previous %q)", i+1, loc, prev.String, err, c.want, c.prev)
		}
	}
	if _, err := CatalogTarget("sqlite:"+db, "rl", "nodot", tbl); err == nil {
		t.Fatal("catalog table without a namespace: no error")
	}
}

// ingestRows appends n rows (from row from on) to the JSONL file src and
// ingests it into tbl, registering the table in cat.
func ingestRows(ctx context.Context, src, tbl string, cat catalog.Target, from, n int) error {
	f, err := os.OpenFile(src, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	for i := from; i < from+n; i++ {
		fmt.Fprintf(f, `{"task":"t","run":%d,"reward":1.0,"model_version":%d}`+"\n", i, i)
	}
	f.Close()
	_, err = Ingest(ctx, src, tbl, Options{Experiment: "e", Catalog: cat})
	return err
}
