package table

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestCommitOnBase prepares appends on a base snapshot while other commits
// land: Commit reads only the commits after the base (an older log file
// made unreadable does not stop it), commits on top of another source's
// commit, and refuses when its own source's watermark moved.
func TestCommitOnBase(t *testing.T) {
	ctx := context.Background()
	tb, err := Open(t.TempDir(), true)
	if err != nil {
		t.Fatal(err)
	}
	appendRows := func(base *Base, source, from, to string) (int64, error) {
		return tb.Commit(ctx, base, Append{Source: source, From: from, To: to, Experiment: "e",
			Columns: []Column{{Name: source, Type: "int64"}}})
	}
	base := func() *Base {
		b, err := tb.Base()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if _, err := appendRows(base(), "a", "", "1"); err != nil {
		t.Fatal(err)
	}
	onA := base() // snapshot 1
	if _, err := appendRows(base(), "b", "", "7"); err != nil {
		t.Fatal(err)
	}
	// Snapshot 1's file is read no more: the base holds its state.
	if err := os.WriteFile(tb.logName(1), []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := appendRows(onA, "a", onA.Watermark("a"), "2"); err != nil || n != 3 {
		t.Fatalf("commit on a base behind another source's commit: snapshot %d, %v; want 3", n, err)
	}
	// Back to the whole log: the state has every commit.
	if err := os.WriteFile(tb.logName(1), []byte(`{"snapshot": 1, "watermarks": {"a": "1"}, "columns": [{"name": "a", "type": "int64"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	now := base()
	if now.Watermark("a") != "2" || now.Watermark("b") != "7" || len(now.s.columns) != 2 {
		t.Fatalf("after the commits: watermarks %v, columns %v", now.s.watermarks, now.s.columns)
	}
	stale := base()
	if _, err := appendRows(base(), "a", "2", "3"); err != nil {
		t.Fatal(err)
	}
	if _, err := appendRows(stale, "a", "2", "3"); !errors.Is(err, ErrConcurrent) {
		t.Fatalf("commit on a base whose source moved since: %v, want ErrConcurrent", err)
	}
	if files, _ := filepath.Glob(filepath.Join(tb.Dir, logDir, "*.json")); len(files) != 4 {
		t.Fatalf("%d commits, want 4", len(files))
	}
}
