// Package table keeps experiences over time: a directory of plain Parquet
// data files, Hive-partitioned by experiment (data/experiment=NAME/), and a
// commit log of its own (_log/N.json, one file per snapshot). A commit
// (data files added or removed, a source's new watermark, an experiment's
// config) becomes visible by one atomic link of its log file: a reader
// sees the snapshot before it or the one after it, never a part, and of two
// committers racing for one snapshot number exactly one wins. A table is a
// store for every command: Files lists the data files of a snapshot,
// pruned by a filter on the experiment and the files' model_version range.
package table

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rftpipe/rftpipe/schema"
)

// Marker is the file that makes a directory an experience table.
const Marker = "_rftpipe_table.json"

// ExperimentColumn is the column (and partition) naming each row's
// experiment.
const ExperimentColumn = schema.Experiment

// VersionColumn is the column whose range each data file records, for
// pruning reads by explore step.
const VersionColumn = "model_version"

const (
	logDir       = "_log"
	formatName   = "rftpipe-table"
	logNameWidth = 20
)

// marker is the content of Marker.
type marker struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
}

// DataFile is one Parquet data file of a table.
type DataFile struct {
	Path       string `json:"path"` // relative to the table directory
	Rows       int64  `json:"rows"`
	Bytes      int64  `json:"bytes,omitempty"` // the file's size, set by the commit
	Experiment string `json:"experiment"`
	// the range of model_version in the file; absent when it holds none
	MinVersion *int64 `json:"min_model_version,omitempty"`
	MaxVersion *int64 `json:"max_model_version,omitempty"`
}

// entry is one commit of the log: the snapshot it makes.
type entry struct {
	Snapshot   int64             `json:"snapshot"`
	Time       time.Time         `json:"time"`
	Operation  string            `json:"operation"` // append, compact or expire
	Source     string            `json:"source,omitempty"`
	Experiment string            `json:"experiment,omitempty"`
	Added      []DataFile        `json:"added,omitempty"`
	Removed    []string          `json:"removed,omitempty"`
	Watermarks map[string]string `json:"watermarks,omitempty"`
	// Config holds key fields of experiments' Trinity configs, by
	// experiment then field.
	Config map[string]map[string]string `json:"config,omitempty"`
	// ExpiredBefore: the snapshots before this one are expired (Expire).
	ExpiredBefore int64 `json:"expired_before,omitempty"`
	// Columns are the table's columns after an append.
	Columns []Column `json:"columns,omitempty"`
}

// IsTable reports whether dir is an experience table (holds Marker).
func IsTable(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, Marker))
	return err == nil && st.Mode().IsRegular()
}

// Table is an open experience table.
type Table struct {
	Dir string
	// warnings are the problems met after a commit was made (see
	// Warnings).
	warnings []string
}

// Warnings returns, one line each, the problems met after commits were
// made: the Iceberg metadata of a commit that could not be written (the
// commit stands; the next one writes what is missing).
func (t *Table) Warnings() []string { return t.warnings }

// Open opens the table at dir; with create, a directory that is not one
// yet (missing or empty) becomes one.
func Open(dir string, create bool) (*Table, error) {
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
	if err := json.Unmarshal(b, &m); err != nil || m.Format != formatName || m.Version != 1 {
		return nil, schema.Errorf(filepath.Join(dir, Marker), -1, "", "not an rftpipe table marker (want {\"format\": %q, \"version\": 1})", formatName)
	}
	return &Table{Dir: dir}, nil
}

// initDir makes dir a table: the log directory first, then the marker,
// written atomically, so a directory with the marker is a whole table.
// Two processes creating one table both succeed, with one marker.
func initDir(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, logDir), 0o755); err != nil {
		return schema.Errorf(dir, -1, "", "cannot create the table directory: %v", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return schema.Errorf(dir, -1, "", "cannot list: %v", err)
	}
	for _, e := range entries {
		if n := e.Name(); n != logDir && n != "data" && n != Marker && !strings.HasPrefix(n, ".") {
			return schema.Errorf(dir, -1, "", "not an experience table and not empty (holds %s): name a new directory", n)
		}
	}
	b, _ := json.Marshal(marker{Format: formatName, Version: 1})
	if err := writeNew(filepath.Join(dir, Marker), b, true); err != nil && !errors.Is(err, os.ErrExist) {
		return schema.Errorf(dir, -1, "", "cannot write %s: %v", Marker, err)
	}
	return nil
}

// writeNew writes b to a temp file beside path, fsyncs it and links it to
// path: atomic, and failing with os.ErrExist when path exists (the
// compare-and-swap of a commit). With replace, an existing regular file at
// path is replaced instead; a link, FIFO or other special file is not.
func writeNew(path string, b []byte, replace bool) error {
	if fi, err := os.Lstat(path); replace && err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (%s): not replaced", path, fi.Mode().Type())
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err = tmp.Write(b); err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	commitPoint("before-link")
	if replace {
		err = os.Rename(tmp.Name(), path)
	} else {
		err = os.Link(tmp.Name(), path)
	}
	if err != nil {
		return err
	}
	syncDir(filepath.Dir(path))
	return nil
}

// syncDir fsyncs a directory, making a rename or link in it durable.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// commitPoint, when set (by tests), is called at each point of a commit.
var commitPoint = func(string) {}

// DataDir returns the directory new data files of experiment go into.
func (t *Table) DataDir(experiment string) string {
	return filepath.Join(t.Dir, "data", ExperimentColumn+"="+escape(experiment))
}

// escape makes an experiment name a directory name as Hive does.
func escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == 0x7f || strings.IndexByte("\"#%'*/:=?\\{}[]^", c) >= 0 {
			fmt.Fprintf(&b, "%%%02X", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// state is a snapshot: its data files and what the commits up to it set.
type state struct {
	snapshot   int64
	time       time.Time
	expired    int64 // snapshots before this one are expired
	files      map[string]DataFile
	order      []string // the paths of files, in the order rows were committed
	watermarks map[string]string
	config     map[string]map[string]string
	columns    []Column
}

// logName returns the log file of snapshot n.
func (t *Table) logName(n int64) string {
	return filepath.Join(t.Dir, logDir, fmt.Sprintf("%0*d.json", logNameWidth, n))
}

// entries reads the log, oldest first: the commits whose files are there.
func (t *Table) entries() ([]entry, error) {
	return t.entriesAfter(0)
}

// entriesAfter reads the commits after snapshot n, oldest first; it reads
// only their files.
func (t *Table) entriesAfter(n int64) ([]entry, error) {
	des, err := os.ReadDir(filepath.Join(t.Dir, logDir))
	if err != nil {
		return nil, schema.Errorf(t.Dir, -1, "", "cannot list the commit log: %v", err)
	}
	var out []entry
	for _, de := range des {
		name := de.Name()
		if !strings.HasSuffix(name, ".json") || strings.HasPrefix(name, ".") {
			continue
		}
		if k, err := strconv.ParseInt(strings.TrimSuffix(name, ".json"), 10, 64); err != nil || k <= n {
			continue
		}
		p := filepath.Join(t.Dir, logDir, name)
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, schema.Errorf(p, -1, "", "cannot read: %v", err)
		}
		var e entry
		if err := json.Unmarshal(b, &e); err != nil {
			return nil, schema.Errorf(p, -1, "", "corrupt commit: %v", err)
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Snapshot < out[j].Snapshot })
	for i, e := range out {
		if want := n + int64(i) + 1; e.Snapshot != want {
			return nil, schema.Errorf(t.logName(want), -1, "", "commit log has a gap: snapshot %d missing", want)
		}
	}
	return out, nil
}

// replay returns the state after the entries up to snapshot n (all when
// n < 0).
func replay(es []entry, n int64) *state {
	s := &state{files: map[string]DataFile{}, watermarks: map[string]string{}, config: map[string]map[string]string{}}
	s.replay(es, n)
	return s
}

// replay applies to s the entries up to snapshot n (all when n < 0).
func (s *state) replay(es []entry, n int64) {
	for _, e := range es {
		if n >= 0 && e.Snapshot > n {
			break
		}
		s.snapshot, s.time = e.Snapshot, e.Time
		if e.ExpiredBefore > s.expired {
			s.expired = e.ExpiredBefore
		}
		s.apply(e)
		for k, v := range e.Watermarks {
			s.watermarks[k] = v
		}
		for exp, c := range e.Config {
			s.config[exp] = c
		}
		if e.Columns != nil {
			s.columns = e.Columns
		}
	}
}

// apply applies e's files to s: appended files go last, and the files a
// compaction adds take the place of the first file it removes, so the rows
// keep their order.
func (s *state) apply(e entry) {
	removed := map[string]bool{}
	for _, p := range e.Removed {
		removed[p] = true
		delete(s.files, p)
	}
	var order []string
	placed := false
	for _, p := range s.order {
		if !removed[p] {
			order = append(order, p)
		} else if !placed {
			for _, f := range e.Added {
				order = append(order, f.Path)
			}
			placed = true
		}
	}
	if !placed {
		for _, f := range e.Added {
			order = append(order, f.Path)
		}
	}
	for _, f := range e.Added {
		s.files[f.Path] = f
	}
	s.order = order
}

// head returns the current state.
func (t *Table) head() (*state, []entry, error) {
	es, err := t.entries()
	if err != nil {
		return nil, nil, err
	}
	return replay(es, -1), es, nil
}
