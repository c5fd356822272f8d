// Package table keeps experiences over time: an Apache Iceberg table
// (format version 2) in a directory, whose data files are plain Parquet
// under data/experiment=NAME/, partitioned by experiment, with an embedded
// SQL catalog (a SQLite file beside the data). Every append, with the new
// watermark of the source it read, is one Iceberg commit: readers see the
// snapshot before it or the one after it, never a part. A table is a store
// for every command: Files lists the data files of a snapshot, pruned by a
// filter on the partition and column statistics.
package table

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	itable "github.com/apache/iceberg-go/table"
	_ "modernc.org/sqlite" // the embedded catalog's driver

	"github.com/rftpipe/rftpipe/schema"
)

// Marker is the file that makes a directory an experience table.
const Marker = "_rftpipe_table.json"

const (
	catalogFile = "_catalog.sqlite"
	namespace   = "rftpipe"
	tableName   = "experiences"
	// ExperimentColumn is the column (and partition) naming each row's
	// experiment.
	ExperimentColumn = "experiment"
	// property prefixes: a source's watermark, an experiment's config
	watermarkProp  = "rftpipe.watermark."
	experimentProp = "rftpipe.experiment."
)

// marker is the content of Marker.
type marker struct {
	Format  string `json:"format"`
	Catalog string `json:"catalog"`
}

// IsTable reports whether dir is an experience table (holds Marker).
func IsTable(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, Marker))
	return err == nil && st.Mode().IsRegular()
}

// Table is an open experience table.
type Table struct {
	Dir string
	db  *sql.DB
	cat *sqlcat.Catalog
}

// Open opens the table at dir; with create, a directory that is not one
// yet (missing or empty) becomes one.
func Open(ctx context.Context, dir string, create bool) (*Table, error) {
	if !IsTable(dir) {
		if !create {
			return nil, schema.Errorf(dir, -1, "", "not an experience table (no %s)", Marker)
		}
		if err := initDir(dir); err != nil {
			return nil, err
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, Marker))
	if err != nil {
		return nil, schema.Errorf(dir, -1, "", "cannot read %s: %v", Marker, err)
	}
	var m marker
	if err := json.Unmarshal(b, &m); err != nil || m.Format != "iceberg" {
		return nil, schema.Errorf(filepath.Join(dir, Marker), -1, "", "not an rftpipe table marker (want {\"format\": \"iceberg\", …})")
	}
	// WAL and a busy timeout: concurrent committers wait for each other's
	// catalog transaction instead of failing.
	dsn := "file:" + filepath.Join(dir, catalogFile) + "?_pragma=busy_timeout(30000)&_pragma=journal_mode(WAL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, schema.Errorf(dir, -1, "", "cannot open the catalog: %v", err)
	}
	cat, err := sqlcat.NewCatalog(namespace, db, sqlcat.SQLite, iceberg.Properties{"warehouse": "file://" + dir})
	if err != nil {
		db.Close()
		return nil, schema.Errorf(dir, -1, "", "cannot open the catalog: %v", err)
	}
	t := &Table{Dir: dir, db: db, cat: cat}
	if err := cat.CreateSQLTables(ctx); err != nil {
		t.Close()
		return nil, schema.Errorf(dir, -1, "", "cannot set up the catalog: %v", err)
	}
	if err := cat.CreateNamespace(ctx, itable.Identifier{namespace}, nil); err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
		t.Close()
		return nil, schema.Errorf(dir, -1, "", "cannot set up the catalog: %v", err)
	}
	return t, nil
}

// initDir makes dir a table: the marker is written last, atomically, so a
// directory with the marker has its catalog beside it.
func initDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return schema.Errorf(dir, -1, "", "cannot create the table directory: %v", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return schema.Errorf(dir, -1, "", "cannot list: %v", err)
	}
	for _, e := range entries {
		if e.Name() != catalogFile && !strings.HasPrefix(e.Name(), catalogFile) {
			return schema.Errorf(dir, -1, "", "not an experience table and not empty (holds %s): name a new directory", e.Name())
		}
	}
	b, _ := json.Marshal(marker{Format: "iceberg", Catalog: catalogFile})
	tmp, err := os.CreateTemp(dir, ".marker-*")
	if err != nil {
		return schema.Errorf(dir, -1, "", "cannot write %s: %v", Marker, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, Marker))
	}
	if err != nil {
		return schema.Errorf(dir, -1, "", "cannot write %s: %v", Marker, err)
	}
	return nil
}

// Close releases the catalog.
func (t *Table) Close() error {
	t.cat.Close()
	return t.db.Close()
}

func ident() itable.Identifier { return itable.Identifier{namespace, tableName} }

// load returns the Iceberg table; nil before the first append created it.
func (t *Table) load(ctx context.Context) (*itable.Table, error) {
	tbl, err := t.cat.LoadTable(ctx, ident())
	if errors.Is(err, catalog.ErrNoSuchTable) {
		return nil, nil
	}
	if err != nil {
		return nil, schema.Errorf(t.Dir, -1, "", "cannot load the table: %v", err)
	}
	return tbl, nil
}

// DataDir returns the directory new data files of experiment go into.
func (t *Table) DataDir(experiment string) string {
	return filepath.Join(t.Dir, "data", ExperimentColumn+"="+escape(experiment))
}

// escape makes an experiment name a directory name as Hive does.
func escape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 0x20 || strings.ContainsRune("\"#%'*/:=?\\\x7f{}[]^", r) {
			fmt.Fprintf(&b, "%%%02X", r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}
