package table

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/table/iceberg"
)

// SmallRuns returns, per experiment in commit order, the runs of two or more
// consecutive data files of under target rows each: what a compaction
// rewrites, each run into one file.
func (t *Table) SmallRuns(target int64) ([][]DataFile, error) {
	s, _, err := t.head()
	if err != nil {
		return nil, err
	}
	var runs [][]DataFile
	open := map[string]int{} // experiment -> index of its open run in runs, or -1
	for _, p := range s.order {
		f := s.files[p]
		i, ok := open[f.Experiment]
		if f.Rows >= target {
			open[f.Experiment] = -1
			continue
		}
		if !ok || i < 0 {
			runs = append(runs, nil)
			i = len(runs) - 1
			open[f.Experiment] = i
		}
		runs[i] = append(runs[i], f)
	}
	out := runs[:0]
	for _, r := range runs {
		if len(r) > 1 {
			out = append(out, r)
		}
	}
	return out, nil
}

// Replace commits, as one snapshot, data files that hold exactly the rows of
// the files removed (a compaction), in their place. It fails when one of
// them is no longer in the table (a concurrent compaction); appends that
// land first are kept.
func (t *Table) Replace(ctx context.Context, removed []string, added []DataFile) (int64, error) {
	e := entry{Operation: "compact", Added: added, Removed: removed}
	return t.commit(ctx, nil, e, func(s *state, _ *entry) error {
		for _, p := range removed {
			if _, ok := s.files[p]; !ok {
				return schema.Errorf(t.Dir, -1, "", "data file %s was compacted concurrently: nothing committed", p)
			}
		}
		return nil
	})
}

// Expire removes the data files that no snapshot from the one current at
// before onwards reads (files a compaction replaced), and makes the
// snapshots before that one unreadable (as_of refuses them); it also
// removes the files of commits that never happened (a killed ingest's data
// and commit temp files) last modified before before. It returns the data
// files removed. A reader still reading an expired snapshot loses its
// files: expire only snapshots older than any running read.
func (t *Table) Expire(ctx context.Context, before time.Time) ([]string, error) {
	es, err := t.entries()
	if err != nil {
		return nil, err
	}
	var first int64 // the oldest snapshot kept
	for _, e := range es {
		if !e.Time.After(before) {
			first = e.Snapshot
		}
	}
	live := map[string]bool{}
	for n := first; n <= int64(len(es)); n++ {
		for p := range replay(es, n).files {
			live[p] = true
		}
	}
	var gone []string
	for n := int64(1); n < first; n++ {
		for p := range replay(es, n).files {
			if !live[p] {
				live[p] = true // once
				gone = append(gone, p)
			}
		}
	}
	if first > 1 {
		if _, err := t.commit(ctx, nil, entry{Operation: "expire", ExpiredBefore: first}, func(*state, *entry) error { return nil }); err != nil {
			return nil, err
		}
	}
	orphans, err := t.orphans(before, es)
	if err != nil {
		return nil, err
	}
	gone = append(gone, orphans...)
	for _, p := range gone {
		if err := os.Remove(filepath.Join(t.Dir, filepath.FromSlash(p))); err != nil && !os.IsNotExist(err) {
			return gone, schema.Errorf(p, -1, "", "cannot remove an expired data file: %v", err)
		}
	}
	return gone, nil
}

// orphans returns the files below data/ that no snapshot lists and the
// temp files in _log/ and metadata/, modified before before (relative
// paths).
func (t *Table) orphans(before time.Time, es []entry) ([]string, error) {
	listed := map[string]bool{}
	for _, e := range es {
		for _, f := range e.Added {
			listed[f.Path] = true
		}
	}
	var out []string
	for _, sub := range []string{"data", logDir, iceberg.Dir} {
		root := filepath.Join(t.Dir, sub)
		err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(t.Dir, p)
			rel = filepath.ToSlash(rel)
			if listed[rel] || (sub != "data" && !strings.HasPrefix(d.Name(), ".tmp-")) {
				return nil
			}
			if info, err := d.Info(); err == nil && info.ModTime().Before(before) {
				out = append(out, rel)
			}
			return nil
		})
		if err != nil && !os.IsNotExist(err) {
			return nil, schema.Errorf(root, -1, "", "cannot list: %v", err)
		}
	}
	return out, nil
}
