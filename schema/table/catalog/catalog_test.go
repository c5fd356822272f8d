package catalog

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rftpipe/rftpipe/schema/trinity/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

// catalogs returns the catalog databases to test: a new SQLite file, and
// the test PostgreSQL cluster when there is one.
func catalogs(t *testing.T) map[string]string {
	out := map[string]string{"sqlite": "sqlite:" + filepath.Join(t.TempDir(), "catalog.db")}
	if base, skip := pgtest.Start(); skip == "" {
		out["postgres"] = base
	} else {
		t.Log("PostgreSQL skipped: " + skip)
	}
	return out
}

// row reads a table's row of the catalog.
func row(t *testing.T, u string, tg Target) (loc, prev, typ sql.NullString) {
	t.Helper()
	db, err := open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.QueryRow(`SELECT metadata_location, previous_metadata_location, iceberg_type FROM iceberg_tables
		WHERE catalog_name = $1 AND table_namespace = $2 AND table_name = $3`, tg.Catalog, tg.Namespace, tg.Table).Scan(&loc, &prev, &typ)
	if err != nil {
		t.Fatal(err)
	}
	return loc, prev, typ
}

// TestRegister registers a table's metadata versions in a SQLite and a
// PostgreSQL catalog: the row is created, moved forward with the previous
// location kept, never moved back, and refused to another table; ten
// writers racing end on the newest version.
func TestRegister(t *testing.T) {
	ctx := context.Background()
	for kind, u := range catalogs(t) {
		t.Run(kind, func(t *testing.T) {
			tg := Target{URL: u, Catalog: "c-" + t.Name(), Namespace: "ns.sub", Table: "exp"}
			v := func(n int) string { return fmt.Sprintf("file:///data/exp/metadata/v%d.metadata.json", n) }
			for _, c := range []struct {
				register      string
				want, wantPrv string
			}{
				{v(1), v(1), ""},
				{v(2), v(2), v(1)},
				{v(2), v(2), v(1)}, // the same: unchanged
				{v(1), v(2), v(1)}, // older: unchanged
				{v(10), v(10), v(2)},
			} {
				if err := Register(ctx, tg, c.register); err != nil {
					t.Fatalf("register %s: %v", c.register, err)
				}
				loc, prev, typ := row(t, u, tg)
				if loc.String != c.want || prev.String != c.wantPrv || typ.String != "TABLE" {
					t.Fatalf("after registering %s: %v, %v, %v; want %s, %s, TABLE", c.register, loc, prev, typ, c.want, c.wantPrv)
				}
			}
			err := Register(ctx, tg, "file:///other/exp/metadata/v11.metadata.json")
			if err == nil || !strings.Contains(err.Error(), "registered to file:///data/exp/metadata/v10.metadata.json") {
				t.Fatalf("another table under the name: %v, want a refusal naming the registered one", err)
			}
			var wg sync.WaitGroup
			errs := make([]error, 10)
			for i := range errs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = Register(ctx, tg, v(11+i))
				}()
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			if loc, prev, _ := row(t, u, tg); loc.String != v(20) || prev.String == "" || prev.String == v(20) {
				t.Fatalf("after ten racing writers: %v (previous %v), want %s", loc, prev, v(20))
			}
		})
	}
}

// TestRegisterLegacyCatalog registers into a catalog table of the layout
// before iceberg_type (JDBC catalog V0): the row is written without it.
func TestRegisterLegacyCatalog(t *testing.T) {
	u := "sqlite:" + filepath.Join(t.TempDir(), "catalog.db")
	db, err := open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Exec(`CREATE TABLE iceberg_tables (catalog_name VARCHAR(255) NOT NULL, table_namespace VARCHAR(255) NOT NULL,
		table_name VARCHAR(255) NOT NULL, metadata_location VARCHAR(1000), previous_metadata_location VARCHAR(1000),
		PRIMARY KEY (catalog_name, table_namespace, table_name))`)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	tg := Target{URL: u, Catalog: "c", Namespace: "default", Table: "exp"}
	if err := Register(context.Background(), tg, "file:///d/exp/metadata/v1.metadata.json"); err != nil {
		t.Fatal(err)
	}
	db, _ = open(context.Background(), u)
	defer db.Close()
	var loc string
	if err := db.QueryRow(`SELECT metadata_location FROM iceberg_tables`).Scan(&loc); err != nil || loc != "file:///d/exp/metadata/v1.metadata.json" {
		t.Fatalf("%q %v", loc, err)
	}
}

// TestBadCatalogURL refuses a catalog that is neither SQLite nor
// PostgreSQL, naming the forms.
func TestBadCatalogURL(t *testing.T) {
	for _, u := range []string{"mysql://h/db", "sqlite:", "/a/b.db"} {
		err := Register(context.Background(), Target{URL: u, Catalog: "c", Namespace: "n", Table: "t"}, "file:///x/metadata/v1.metadata.json")
		if err == nil || !strings.Contains(err.Error(), "sqlite:PATH") {
			t.Errorf("%s: %v, want a refusal naming the forms", u, err)
		}
	}
}
