package table

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/table/iceberg"
)

// Append is one commit: Parquet data files written under DataDir, and the
// watermark of the source they were read from, From before and To after.
type Append struct {
	Source   string // the source's identity
	From, To string // watermarks: as read before, and after these rows
	Files    []DataFile
	// Columns are the files' columns: those the table does not have yet
	// are added to it; one the table has with another type is refused.
	Columns []Column
	// Experiment names the rows' experiment; Config, when not nil, the key
	// fields of its Trinity config, recorded with the commit.
	Experiment string
	Config     map[string]string
}

// ErrConcurrent says that another ingest of the same source committed first:
// nothing was committed, and a rerun ingests what remains.
var ErrConcurrent = errors.New("another ingest of this source committed first")

// maxAttempts bounds the retries of a commit that lost a race to commits of
// other sources.
const maxAttempts = 100

// Base is the snapshot an append is prepared on: the table's state, read
// once before the rows are written (their source's watermark, the table's
// columns). Commit brings it up to date by reading only the commits made
// since, so that an append reads the whole log once, however long it is.
type Base struct{ s *state }

// Base reads the table's current snapshot.
func (t *Table) Base() (*Base, error) {
	s, _, err := t.head()
	if err != nil {
		return nil, err
	}
	return &Base{s}, nil
}

// Watermark returns the watermark of source, "" when the table holds none
// of its rows.
func (b *Base) Watermark(source string) string {
	return b.s.watermarks[source]
}

// Commit appends a's files and watermark, prepared on base (which it
// consumes), as one snapshot and returns its number. When another commit
// lands first: if it moved a's source's watermark, a is refused
// (ErrConcurrent: its rows may be in the table already); otherwise a is
// committed again on top of it.
func (t *Table) Commit(ctx context.Context, base *Base, a Append) (int64, error) {
	e := entry{Operation: "append", Source: a.Source, Experiment: a.Experiment, Added: a.Files,
		Watermarks: map[string]string{a.Source: a.To}}
	if a.Config != nil {
		e.Config = map[string]map[string]string{a.Experiment: a.Config}
	}
	return t.commit(ctx, base.s, e, func(s *state, e *entry) error {
		if got := s.watermarks[a.Source]; got != a.From {
			return &schema.InputError{File: t.Dir, Row: -1, Err: ErrConcurrent,
				Msg: fmt.Sprintf("nothing committed; rerun to ingest the rest (%s read from watermark %q, now at %q)", a.Source, a.From, got)}
		}
		cols, err := t.addColumns(a.Source, s.columns, a.Columns)
		e.Columns = cols
		return err
	})
}

// Column is a column of a table: its name and Arrow type (as
// arrow.DataType's String).
type Column struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// addColumns returns the table's columns with those of an append (add, of
// rows read from src) it does not have yet, after them; a column of add
// whose type is not the table's is refused, naming it.
func (t *Table) addColumns(src string, have, add []Column) ([]Column, error) {
	out := append([]Column{}, have...)
	for _, c := range add {
		i := slices.IndexFunc(have, func(h Column) bool { return h.Name == c.Name })
		switch {
		case i < 0:
			if err := iceberg.CheckType(c.Type); err != nil {
				return nil, schema.Errorf(src, -1, c.Name, "%v: a table's columns must have one", err)
			}
			out = append(out, c)
		case have[i].Type != c.Type:
			return nil, schema.Errorf(src, -1, c.Name, "type %s here, %s in table %s: a column's type cannot change; ingest these rows into a table of their own", c.Type, have[i].Type, t.Dir)
		}
	}
	return out, nil
}

// CheckColumns refuses rows of src of these columns when base has one of
// them with another type (addColumns), before they are written; Commit
// checks again against the snapshot it commits on.
func (t *Table) CheckColumns(base *Base, src string, cols []Column) error {
	_, err := t.addColumns(src, base.s.columns, cols)
	return err
}

// commit writes e as the next snapshot once check accepts the current one,
// retrying on the new one when another commit takes the number first. s,
// when not nil, is a state read before (brought up to date from the commits
// after it); nil reads the current one.
func (t *Table) commit(ctx context.Context, s *state, e entry, check func(*state, *entry) error) (int64, error) {
	commitPoint("start")
	if s == nil {
		s = replay(nil, -1)
	}
	for attempt := 0; attempt < maxAttempts; attempt++ {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		es, err := t.entriesAfter(s.snapshot)
		if err != nil {
			return 0, err
		}
		s.replay(es, -1)
		if err := check(s, &e); err != nil {
			return 0, err
		}
		if err := t.sizes(e.Added); err != nil {
			return 0, err
		}
		e.Snapshot, e.Time = s.snapshot+1, time.Now().UTC()
		b, err := json.MarshalIndent(e, "", "  ")
		if err != nil {
			return 0, err
		}
		err = writeNew(t.logName(e.Snapshot), append(b, '\n'), false)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return 0, schema.Errorf(t.Dir, -1, "", "cannot commit: %v", err)
		}
		commitPoint("after-commit")
		t.SyncIceberg()
		return e.Snapshot, nil
	}
	return 0, schema.Errorf(t.Dir, -1, "", "commit lost the race to concurrent commits %d times: nothing committed; rerun", maxAttempts)
}

// sizes sets the size of each data file.
func (t *Table) sizes(files []DataFile) error {
	for i := range files {
		st, err := os.Stat(t.Path(files[i]))
		if err != nil {
			return schema.Errorf(t.Path(files[i]), -1, "", "cannot commit the data file: %v", err)
		}
		files[i].Bytes = st.Size()
	}
	return nil
}

// Rel returns the path of a data file relative to the table directory.
func (t *Table) Rel(path string) (string, error) {
	rel, err := filepath.Rel(t.Dir, path)
	if err != nil {
		return "", schema.Errorf(path, -1, "", "not in table %s", t.Dir)
	}
	return filepath.ToSlash(rel), nil
}
