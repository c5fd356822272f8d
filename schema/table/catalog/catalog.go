// Package catalog registers experience tables in an Iceberg SQL catalog:
// the iceberg_tables table that Iceberg's JDBC catalog (Spark, Trino),
// PyIceberg's SqlCatalog and iceberg-go's SQL catalog share, on SQLite or
// PostgreSQL. A table's row names its current metadata file; Register
// moves it to a newer one by compare-and-swap (UPDATE … WHERE
// metadata_location = the one read), so that of two writers neither loses
// the other's version, and it never moves back.
package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	_ "modernc.org/sqlite"             // database/sql driver "sqlite"

	"github.com/rftpipe/rftpipe/schema"
)

// Target is where a table is registered: the catalog database (sqlite:PATH
// or postgres://…), the catalog's name and the table's namespace and
// name.
type Target struct {
	URL, Catalog, Namespace, Table string
}

// createTable is the V1 layout of Iceberg's JDBC catalog table.
const createTable = `CREATE TABLE IF NOT EXISTS iceberg_tables (
	catalog_name VARCHAR(255) NOT NULL,
	table_namespace VARCHAR(255) NOT NULL,
	table_name VARCHAR(255) NOT NULL,
	metadata_location VARCHAR(1000),
	previous_metadata_location VARCHAR(1000),
	iceberg_type VARCHAR(5),
	PRIMARY KEY (catalog_name, table_namespace, table_name))`

// maxAttempts bounds the compare-and-swaps lost to concurrent writers.
const maxAttempts = 10

// version matches a metadata file's version number.
var version = regexp.MustCompile(`/v([0-9]+)\.metadata\.json$`)

// Register makes location (the URI of a table's metadata version,
// …/metadata/vN.metadata.json) the current metadata of t's table, creating
// the catalog table and the row when missing. A row naming a later version
// of the same table is left; a row naming another table's metadata is
// refused.
func Register(ctx context.Context, t Target, location string) error {
	db, err := open(ctx, t.URL)
	if err != nil {
		return err
	}
	defer db.Close()
	where := schema.Redact(t.URL)
	fail := func(format string, args ...any) error {
		return schema.Errorf(where, -1, "", "catalog table %s.%s: %s", t.Namespace, t.Table, fmt.Sprintf(format, args...))
	}
	if _, err := db.ExecContext(ctx, createTable); err != nil {
		return fail("cannot create iceberg_tables: %v", err)
	}
	typed, err := hasColumn(ctx, db, "iceberg_type")
	if err != nil {
		return fail("cannot read iceberg_tables: %v", err)
	}
	dir := location[:strings.LastIndexByte(location, '/')+1] // the table's metadata directory
	var insertErr error
	for attempt := 0; attempt < maxAttempts; attempt++ {
		var cur sql.NullString
		err := db.QueryRowContext(ctx, `SELECT metadata_location FROM iceberg_tables
			WHERE catalog_name = $1 AND table_namespace = $2 AND table_name = $3`, t.Catalog, t.Namespace, t.Table).Scan(&cur)
		switch {
		case errors.Is(err, sql.ErrNoRows) && insertErr != nil:
			return fail("cannot insert into iceberg_tables: %v", insertErr)
		case errors.Is(err, sql.ErrNoRows):
			insert := `INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location) VALUES ($1, $2, $3, $4)`
			if typed {
				insert = `INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location, iceberg_type) VALUES ($1, $2, $3, $4, 'TABLE')`
			}
			if _, insertErr = db.ExecContext(ctx, insert, t.Catalog, t.Namespace, t.Table, location); insertErr == nil {
				return nil
			}
			continue // registered concurrently: compare with that row
		case err != nil:
			return fail("cannot read iceberg_tables: %v", err)
		case cur.String == location:
			return nil
		case !strings.HasPrefix(cur.String, dir):
			return fail("registered to %s, not to this table: choose another name", cur.String)
		case metadataVersion(cur.String) > metadataVersion(location):
			return nil // a later commit registered its version
		}
		res, err := db.ExecContext(ctx, `UPDATE iceberg_tables SET metadata_location = $1, previous_metadata_location = $2
			WHERE catalog_name = $3 AND table_namespace = $4 AND table_name = $5 AND metadata_location = $2`,
			location, cur.String, t.Catalog, t.Namespace, t.Table)
		if err != nil {
			return fail("cannot update iceberg_tables: %v", err)
		}
		if n, err := res.RowsAffected(); err == nil && n == 1 {
			return nil
		}
	}
	return fail("lost the compare-and-swap to concurrent writers %d times: rerun", maxAttempts)
}

// metadataVersion returns the version of a metadata file, 0 when its name
// has none.
func metadataVersion(loc string) int64 {
	m := version.FindStringSubmatch(loc)
	if m == nil {
		return 0
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

// Source returns the database/sql driver and data source of a catalog URL:
// sqlite:PATH (created when missing) or postgres://… (postgresql://…). A
// command checks its URL with it before any work.
func Source(u string) (driver, dsn string, err error) {
	switch {
	case strings.HasPrefix(u, "sqlite:"):
		p := Target{URL: u}.File()
		if p == "" {
			return "", "", schema.Usagef("catalog %q: want sqlite:PATH", u)
		}
		return "sqlite", "file:" + (&url.URL{Path: p}).EscapedPath() + "?_pragma=busy_timeout(30000)", nil
	case strings.HasPrefix(u, "postgres://"), strings.HasPrefix(u, "postgresql://"):
		return "pgx", u, nil
	}
	return "", "", schema.Usagef("catalog %s: want sqlite:PATH or postgres://…", schema.Redact(u))
}

// File returns the file of a SQLite catalog ("" for PostgreSQL or none).
func (t Target) File() string {
	if !strings.HasPrefix(t.URL, "sqlite:") {
		return ""
	}
	return strings.TrimPrefix(strings.TrimPrefix(t.URL, "sqlite:"), "//")
}

// open connects to the catalog database at u (Source).
func open(ctx context.Context, u string) (*sql.DB, error) {
	driver, dsn, err := Source(u)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open(driver, dsn)
	if err == nil {
		err = db.PingContext(ctx)
	}
	if err != nil {
		return nil, schema.Errorf(schema.Redact(u), -1, "", "cannot open the catalog: %v", err)
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// hasColumn reports whether iceberg_tables has column col (a catalog made
// by an older JDBC catalog lacks iceberg_type).
func hasColumn(ctx context.Context, db *sql.DB, col string) (bool, error) {
	rows, err := db.QueryContext(ctx, `SELECT * FROM iceberg_tables WHERE 1 = 0`)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return false, err
	}
	for _, c := range cols {
		if strings.EqualFold(c, col) {
			return true, nil
		}
	}
	return false, nil
}
