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

// TestObjects: object URLs compare by bucket and key, a prefix as a
// directory; Join keeps a URL's "//".
func TestObjects(t *testing.T) {
	for _, c := range []struct {
		name string
		got  bool
		want bool
	}{
		{"same key", Same("s3://bkt/a/x.parquet", "S3://bkt/a/x.parquet"), true},
		{"prefix with or without /", Same("s3://bkt/a/", "s3://bkt/a"), true},
		{"other bucket", Same("s3://bkt/a", "s3://bkt2/a"), false},
		{"object and local file", Same("s3://bkt/a", "bkt/a"), false},
		{"within", Within("s3://bkt/a", "s3://bkt/a/b/c.parquet"), true},
		{"sibling prefix", Within("s3://bkt/a", "s3://bkt/ab/c.parquet"), false},
		{"matches", Matches("s3://bkt/a/*.parquet", "s3://bkt/a/n.parquet"), true},
		{"* does not cross /", Matches("s3://bkt/a/*.parquet", "s3://bkt/a/d/n.parquet"), false},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	if got := Join("s3://bkt/out", "_metrics", "part-0.json"); got != "s3://bkt/out/_metrics/part-0.json" {
		t.Errorf("Join = %s", got)
	}
}
