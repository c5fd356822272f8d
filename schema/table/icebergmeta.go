package table

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/table/iceberg"
)

// SyncIceberg writes the Iceberg metadata of the log's snapshots that the
// table's metadata directory lacks (package iceberg): every commit does,
// after its log commit, so a snapshot is in the log before Iceberg readers
// see it, and ingest and compact do when they end, so metadata a killed
// commit left out is written. A failure is not the commit's: it is kept
// as a warning (Warnings).
func (t *Table) SyncIceberg() {
	err := t.writeIceberg()
	if err != nil && !slices.Contains(t.warnings, err.Error()) {
		t.warnings = append(t.warnings, err.Error())
	}
}

// writeIceberg writes the Iceberg metadata the table lacks.
func (t *Table) writeIceberg() error {
	es, err := t.entries()
	if err != nil || len(es) == 0 {
		return err
	}
	abs, err := filepath.Abs(t.Dir)
	if err != nil {
		return schema.Errorf(t.Dir, -1, "", "cannot resolve the path: %v", err)
	}
	first, err := os.ReadFile(t.logName(1))
	if err != nil {
		return schema.Errorf(t.logName(1), -1, "", "cannot read: %v", err)
	}
	it := &iceberg.Table{Dir: abs, UUID: iceberg.UUID(first), Partition: ExperimentColumn, Version: VersionColumn,
		WriteFile: func(path string, data []byte, replace bool) error {
			if strings.HasSuffix(path, ".metadata.json") {
				commitPoint("before-metadata") // a version's Avro files written, its JSON not
			}
			return writeNew(path, data, replace)
		}}
	if it.Written(int64(len(es))) == int64(len(es)) {
		return nil
	}
	commits := make([]iceberg.Commit, len(es))
	for i, e := range es {
		c := iceberg.Commit{Time: e.Time, Operation: e.Operation, Removed: e.Removed, ExpiredBefore: e.ExpiredBefore}
		for _, col := range e.Columns {
			c.Columns = append(c.Columns, iceberg.Column{Name: col.Name, Type: col.Type})
		}
		for _, f := range e.Added {
			if f.Bytes == 0 { // committed before sizes were recorded
				st, err := os.Stat(t.Path(f))
				if err != nil {
					return schema.Errorf(t.Dir, -1, "", "Iceberg metadata: data file %s of snapshot %d: %v", f.Path, e.Snapshot, err)
				}
				f.Bytes = st.Size()
			}
			c.Added = append(c.Added, iceberg.File{Path: f.Path, Experiment: f.Experiment, Rows: f.Rows, Size: f.Bytes,
				MinVersion: f.MinVersion, MaxVersion: f.MaxVersion})
		}
		commits[i] = c
	}
	if err := it.Write(commits); err != nil {
		return schema.Errorf(filepath.Join(t.Dir, iceberg.Dir), -1, "", "cannot write the Iceberg metadata: %v", err)
	}
	return nil
}

// IcebergMetadata returns the URI of the newest Iceberg metadata version
// written, "" when there is none.
func (t *Table) IcebergMetadata() (string, error) {
	es, err := t.entries()
	if err != nil {
		return "", err
	}
	abs, err := filepath.Abs(t.Dir)
	if err != nil {
		return "", schema.Errorf(t.Dir, -1, "", "cannot resolve the path: %v", err)
	}
	it := &iceberg.Table{Dir: abs}
	n := it.Written(int64(len(es)))
	if n == 0 {
		return "", nil
	}
	return it.URI(it.MetadataPath(n)), nil
}
