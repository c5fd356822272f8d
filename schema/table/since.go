package table

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/fspath"
)

// MarkDir is the directory, beside a job's output, that holds the
// watermarks of the jobs run with --since-last into that directory: one
// file per job label, LABEL.json.
const MarkDir = "_since_last"

// mark is a job's watermark: the last snapshot of Table it processed.
type mark struct {
	Table    string    `json:"table"`
	Snapshot int64     `json:"snapshot"`
	Time     time.Time `json:"time"`
}

// Increment is an incremental read of a table by a job: the rows appended
// after the snapshot the job processed last (From, 0 when none) up to the
// table's snapshot when the job started (To). In an increment, an explore
// step (an experiment's model_version) is read only when all its rows were
// appended after From: the rows of a step that has rows at or before From
// (an ingest that ran while the step was being written, whose first part
// the last run processed as groups of their own) are left out, and the
// read warns of them (see Since).
type Increment struct {
	Dir      string
	From, To int64
	// In is the store to read: DIR?as_of=To&since=From&where=… .
	In string
	// New: some data file was appended after From (and matches where).
	New  bool
	mark string
}

// SinceLast plans the incremental read of the table store in (DIR or
// DIR?where=…) by the job labelled label that writes out: its watermark is
// MarkDir/label.json in out's directory (or prefix, for an object), read
// with read (a file not there: os.ErrNotExist).
func SinceLast(in, out, label string, read func(string) ([]byte, error)) (*Increment, error) {
	dir, spec, ok, err := ParseStore(in)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, schema.Usagef("--since-last reads an experience table: %s is not one", schema.Redact(in))
	}
	if spec.AsOf != "" || spec.Since != 0 {
		return nil, schema.Usagef("--since-last chooses the snapshots read: drop as_of and since from %s", in)
	}
	if label == "" || strings.ContainsAny(label, `/\`) || label[0] == '.' {
		return nil, schema.Usagef("--since-last keeps the watermark in a file named by the job label: %q is not a file name (set --job-label)", label)
	}
	t, err := Open(dir, false)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, schema.Errorf(dir, -1, "", "cannot resolve the path: %v", err)
	}
	inc := &Increment{Dir: dir, mark: fspath.Join(fspath.Dir(out), MarkDir, label+".json")}
	if inc.From, err = readMark(read, inc.mark, abs); err != nil {
		return nil, err
	}
	es, err := t.entries()
	if err != nil {
		return nil, err
	}
	inc.To = int64(len(es))
	if inc.From > inc.To {
		return nil, schema.Errorf(inc.mark, -1, "snapshot", "the job processed snapshot %d, but table %s has %d: not this table's watermark", inc.From, dir, inc.To)
	}
	spec.AsOf, spec.Since = strconv.FormatInt(inc.To, 10), inc.From
	if inc.To > 0 {
		added, _, err := t.increment(es, spec)
		if err != nil {
			return nil, err
		}
		inc.New = len(added) > 0
	}
	inc.In = dir + "?as_of=" + spec.AsOf + "&since=" + strconv.FormatInt(spec.Since, 10)
	if spec.Where != "" {
		inc.In += "&where=" + spec.Where
	}
	return inc, nil
}

// readMark returns the snapshot a watermark file records (0 when there is
// none), refusing one of another table than abs.
func readMark(read func(string) ([]byte, error), path, abs string) (int64, error) {
	b, err := read(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, schema.Errorf(path, -1, "", "cannot read the watermark: %v", err)
	}
	var m mark
	if err := json.Unmarshal(b, &m); err != nil || m.Snapshot < 0 {
		return 0, schema.Errorf(path, -1, "", "not a --since-last watermark (want {\"table\": DIR, \"snapshot\": N})")
	}
	if m.Table != abs {
		return 0, schema.Errorf(path, -1, "table", "the watermark of the job's reads of table %s, not of %s: give the job another label (--job-label) or output directory", m.Table, abs)
	}
	return m.Snapshot, nil
}

// Mark returns the watermark file and the record that makes To the job's
// watermark: the caller writes it atomically (store.WriteFile) once the
// job's output is committed, so a job that fails before leaves the
// watermark as it was.
func (inc *Increment) Mark() (path string, record []byte, err error) {
	abs, err := filepath.Abs(inc.Dir)
	if err != nil {
		return "", nil, schema.Errorf(inc.Dir, -1, "", "cannot resolve the path: %v", err)
	}
	b, _ := json.MarshalIndent(mark{Table: abs, Snapshot: inc.To, Time: time.Now().UTC()}, "", "  ")
	return inc.mark, append(b, '\n'), nil
}

// Since returns what a read of an increment (s.Since > 0) reads: the data
// files appended after snapshot s.Since up to the snapshot s selects,
// pruned by s.Where, in commit order, and the files of snapshot s.Since
// that can hold rows of the same explore steps (of the same experiment,
// their model_version ranges overlapping). The caller leaves out the rows
// of added whose (experiment, model_version) a row of before holds.
func (t *Table) Since(s Spec) (added, before []DataFile, err error) {
	es, err := t.entries()
	if err != nil {
		return nil, nil, err
	}
	return t.increment(es, s)
}

// increment is Since over the log es.
func (t *Table) increment(es []entry, s Spec) (added, before []DataFile, err error) {
	n := int64(len(es))
	if s.AsOf != "" {
		if n, err = t.asOf(es, s.AsOf); err != nil {
			return nil, nil, err
		}
	}
	if s.Since < 0 || s.Since > n {
		return nil, nil, schema.Errorf(t.Dir, -1, "", "since %d: not a snapshot at or before %d", s.Since, n)
	}
	if s.Since > 0 && s.Since < replay(es, -1).expired {
		return nil, nil, schema.Errorf(t.Dir, -1, "", "since %d: the snapshot is expired (compact --expire-before): run once over the whole table", s.Since)
	}
	keep := func(DataFile) bool { return true }
	if s.Where != "" {
		if keep, err = parseWhere(s.Where); err != nil {
			return nil, nil, schema.Errorf(t.Dir, -1, "", "where %q: %v", s.Where, err)
		}
	}
	for _, e := range es[s.Since:n] {
		if e.Operation != "append" {
			continue
		}
		for _, f := range e.Added {
			if keep(f) {
				added = append(added, f)
			}
		}
	}
	old := replay(es, s.Since)
	for _, p := range old.order {
		f := old.files[p]
		for _, a := range added {
			if a.Experiment == f.Experiment && overlap(a, f) {
				before = append(before, f)
				break
			}
		}
	}
	for _, f := range append(append([]DataFile{}, added...), before...) {
		if _, err := os.Stat(filepath.Join(t.Dir, filepath.FromSlash(f.Path))); err != nil {
			return nil, nil, schema.Errorf(t.Dir, -1, "", "since %d: data file %s is gone (expired by compact --expire-before): run once over the whole table", s.Since, f.Path)
		}
	}
	return added, before, nil
}

// overlap reports whether two data files' model_version ranges overlap.
func overlap(a, b DataFile) bool {
	if a.MinVersion == nil || b.MinVersion == nil {
		return false
	}
	return *a.MinVersion <= *b.MaxVersion && *b.MinVersion <= *a.MaxVersion
}
