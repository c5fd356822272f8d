package fspath

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSpellings: every spelling of one file is that file, through a
// symbolic link of any component or a hard link, existing or not; names
// that differ only in case are two files on a file system that keeps
// case.
func TestSpellings(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	must(t, os.Mkdir(real, 0o755))
	must(t, os.WriteFile(filepath.Join(real, "a.parquet"), nil, 0o644))
	must(t, os.Symlink(real, filepath.Join(dir, "link")))
	must(t, os.Symlink(filepath.Join(dir, "link"), filepath.Join(dir, "link2")))
	must(t, os.Link(filepath.Join(real, "a.parquet"), filepath.Join(dir, "hard.parquet")))
	cases := []struct {
		name string
		got  bool
		want bool
	}{
		{"a file through a linked directory", Same(filepath.Join(dir, "link", "a.parquet"), filepath.Join(real, "a.parquet")), true},
		{"a new file through a linked directory", Same(filepath.Join(dir, "link", "x.parquet"), filepath.Join(real, "x.parquet")), true},
		{"a new file below a new directory, through two links", Same(filepath.Join(dir, "link2", "new", "x.parquet"), filepath.Join(real, "new", "x.parquet")), true},
		{"a hard link", Same(filepath.Join(dir, "hard.parquet"), filepath.Join(real, "a.parquet")), true},
		{"with ..", Same(filepath.Join(dir, "link", "..", "real", "a.parquet"), filepath.Join(real, "a.parquet")), true},
		{"two new files", Same(filepath.Join(real, "x.parquet"), filepath.Join(real, "y.parquet")), false},
		{"case differs, new files", Same(filepath.Join(real, "x.parquet"), filepath.Join(real, "X.parquet")), false},
		{"within a linked directory", Within(filepath.Join(dir, "link"), filepath.Join(real, "sub", "x.parquet")), true},
		{"a directory within itself", Within(filepath.Join(dir, "link2"), real), true},
		{"beside, not within", Within(real, filepath.Join(dir, "reality", "x")), false},
		{"a glob through a linked directory", Matches(filepath.Join(dir, "link", "*.parquet"), filepath.Join(real, "new.parquet")), true},
		{"a glob's directory pattern through a link", Matches(filepath.Join(dir, "l*k", "*.parquet"), filepath.Join(real, "new.parquet")), true},
		{"a glob, another name", Matches(filepath.Join(dir, "link", "*.parquet"), filepath.Join(real, "new.json")), false},
		{"a glob, another directory", Matches(filepath.Join(dir, "link", "*.parquet"), filepath.Join(dir, "new.parquet")), false},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
