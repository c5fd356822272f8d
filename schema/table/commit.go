package table

import (
	"context"
	"errors"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	itable "github.com/apache/iceberg-go/table"

	"github.com/rftpipe/rftpipe/schema"
)

// Append is one commit: Parquet data files written under DataDir, and the
// watermark of the source they were read from, From before and To after.
type Append struct {
	Source   string // the source's identity (see SourceKey)
	From, To string // watermarks: as read before, and after these rows
	Files    []string
	Rows     int64
	// Experiment names the rows' experiment; Config, when not nil, the key
	// fields of its Trinity config, recorded with the commit.
	Experiment string
	Config     map[string]string
}

// ErrConcurrent says that another ingest of the same source committed first:
// nothing was committed, and a rerun ingests what remains.
var ErrConcurrent = errors.New("another ingest of this source committed first")

// commitPoint, when set (by tests), is called at each point of a commit.
var commitPoint = func(string) {}

// maxAttempts bounds the retries of a commit that lost a race to a commit
// of another source.
const maxAttempts = 10

// Commit appends a's files and watermark as one snapshot and returns its id.
// When another commit lands first: if it moved a's source's watermark, a
// is refused (ErrConcurrent: its rows may be in the table already);
// otherwise a is committed again on top of it.
func (t *Table) Commit(ctx context.Context, a Append) (int64, error) {
	for attempt := 0; attempt < maxAttempts; attempt++ {
		tbl, err := t.load(ctx)
		if err != nil {
			return 0, err
		}
		if tbl == nil {
			if tbl, err = t.create(ctx, a.Files[0]); err != nil {
				return 0, err
			}
			if tbl == nil { // created by a concurrent commit
				continue
			}
		}
		if got := tbl.Properties()[watermarkProp+a.Source]; got != a.From {
			return 0, schema.Errorf(t.Dir, -1, "", "%v (%s now at %q, this one read from %q): nothing committed; rerun to ingest the rest", ErrConcurrent, a.Source, got, a.From)
		}
		if err := sameColumns(tbl, a.Files[0]); err != nil {
			return 0, err
		}
		tx := tbl.NewTransaction()
		// Pinned to the snapshot read: a race is retried here, with the
		// watermark checked again, never replayed by iceberg-go.
		if err := tx.AssertRefSnapshotID(""); err != nil {
			return 0, t.commitErr(err)
		}
		props := iceberg.Properties{watermarkProp + a.Source: a.To}
		for k, v := range a.Config {
			props[experimentProp+a.Experiment+"."+k] = v
		}
		if err := tx.SetProperties(props); err != nil {
			return 0, t.commitErr(err)
		}
		paths := make([]string, len(a.Files))
		for i, f := range a.Files {
			paths[i] = "file://" + f
		}
		summary := iceberg.Properties{"rftpipe.source": a.Source, "rftpipe.experiment": a.Experiment, "rftpipe.rows": strconv.FormatInt(a.Rows, 10)}
		if err := tx.AddFiles(ctx, paths, summary, true); err != nil {
			return 0, t.commitErr(err)
		}
		commitPoint("before-commit")
		tbl, err = tx.Commit(ctx)
		if errors.Is(err, itable.ErrCommitFailed) {
			continue
		}
		if err != nil {
			return 0, t.commitErr(err)
		}
		commitPoint("after-commit")
		return tbl.CurrentSnapshot().SnapshotID, nil
	}
	return 0, schema.Errorf(t.Dir, -1, "", "commit lost the race to concurrent commits %d times: nothing committed; rerun", maxAttempts)
}

func (t *Table) commitErr(err error) error {
	return schema.Errorf(t.Dir, -1, "", "cannot commit: %v", err)
}

// create creates the Iceberg table with the columns of the Parquet file f,
// partitioned by experiment; nil when a concurrent commit created it first.
func (t *Table) create(ctx context.Context, f string) (*itable.Table, error) {
	asc, err := parquetSchema(f)
	if err != nil {
		return nil, err
	}
	sc, err := itable.ArrowSchemaToIcebergWithFreshIDs(asc, false)
	if err != nil {
		return nil, schema.Errorf(f, -1, "", "no Iceberg schema for these columns: %v", err)
	}
	spec, err := iceberg.NewPartitionSpecOpts(iceberg.AddPartitionFieldByName(ExperimentColumn, ExperimentColumn, iceberg.IdentityTransform{}, sc, nil))
	if err != nil {
		return nil, schema.Errorf(f, -1, ExperimentColumn, "cannot partition: %v", err)
	}
	tbl, err := t.cat.CreateTable(ctx, ident(), sc, catalog.WithPartitionSpec(&spec), catalog.WithLocation("file://"+t.Dir),
		catalog.WithProperties(iceberg.Properties{"format-version": "2"}))
	if errors.Is(err, catalog.ErrTableAlreadyExists) {
		return nil, nil
	}
	if err != nil {
		return nil, schema.Errorf(t.Dir, -1, "", "cannot create the table: %v", err)
	}
	return tbl, nil
}

// parquetSchema reads the Arrow schema of a Parquet file's footer.
func parquetSchema(f string) (*arrow.Schema, error) {
	r, err := file.OpenParquetFile(f, false)
	if err != nil {
		return nil, schema.Errorf(f, -1, "", "cannot read the footer: %v", err)
	}
	defer r.Close()
	asc, err := pqarrow.FromParquet(r.MetaData().Schema, nil, nil)
	if err != nil {
		return nil, schema.Errorf(f, -1, "", "cannot read the schema: %v", err)
	}
	return asc, nil
}

// sameColumns refuses a data file whose columns are not the table's: every
// data file of a table holds the same columns, so that it reads as one store.
func sameColumns(tbl *itable.Table, f string) error {
	asc, err := parquetSchema(f)
	if err != nil {
		return err
	}
	fields := tbl.Schema().Fields()
	have := map[string]bool{}
	for _, fl := range asc.Fields() {
		have[fl.Name] = true
	}
	for _, fl := range fields {
		if !have[fl.Name] {
			return schema.Errorf(f, -1, fl.Name, "the table has this column and these rows do not: ingest them into a table of their own")
		}
		delete(have, fl.Name)
	}
	for name := range have {
		return schema.Errorf(f, -1, name, "these rows have this column and the table does not: ingest them into a table of their own")
	}
	return nil
}

// Watermark returns the watermark of source in the current snapshot, "" when
// the table holds none of its rows.
func (t *Table) Watermark(ctx context.Context, source string) (string, error) {
	tbl, err := t.load(ctx)
	if err != nil || tbl == nil {
		return "", err
	}
	return tbl.Properties()[watermarkProp+source], nil
}
