package table

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/rftpipe/rftpipe/schema"
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
	return t.commit(ctx, e, func(s *state) error {
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
// snapshots before that one unreadable (as_of refuses them). It returns the
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
	if first <= 1 {
		return nil, nil
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
	if _, err := t.commit(ctx, entry{Operation: "expire", ExpiredBefore: first}, func(*state) error { return nil }); err != nil {
		return nil, err
	}
	for _, p := range gone {
		if err := os.Remove(filepath.Join(t.Dir, filepath.FromSlash(p))); err != nil && !os.IsNotExist(err) {
			return gone, schema.Errorf(p, -1, "", "cannot remove an expired data file: %v", err)
		}
	}
	return gone, nil
}
