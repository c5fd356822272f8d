package iceberg

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// restoreCommits are benchCommits(160) with a column added at commit 30
// (a struct nesting a list), dropped at 90, and files without versions.
func restoreCommits() []Commit {
	commits := benchCommits(160)
	cols := commits[0].Columns
	commits[29].Columns = append(append([]Column{}, cols...), Column{"info", "struct<a: int64, b: list<item: utf8, nullable>>"})
	commits[89].Columns = cols
	for _, k := range []int{40, 41, 120} {
		if len(commits[k].Added) == 1 {
			commits[k].Added[0].MinVersion, commits[k].Added[0].MaxVersion = nil, nil
		}
	}
	return commits
}

// metadataFiles returns the metadata directory's files by name.
func metadataFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	des, err := os.ReadDir(filepath.Join(dir, Dir))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, de := range des {
		if out[de.Name()], err = os.ReadFile(filepath.Join(dir, Dir, de.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestWriteFromPreviousVersion: each version built from the one before,
// read back (Write handed only the new commit), gives the files of the
// replay of the whole log, byte for byte, through appends, schema
// changes, compactions and expiries; a previous version that does not
// read whole is not built from: the log is replayed.
func TestWriteFromPreviousVersion(t *testing.T) {
	commits := restoreCommits()
	dir := t.TempDir()
	tb := &Table{Dir: dir, UUID: UUID([]byte("restore")), Partition: "experiment", Version: "model_version", WriteFile: writeFile}
	if err := tb.Write(commits); err != nil {
		t.Fatal(err)
	}
	want := metadataFiles(t, dir)
	if err := os.RemoveAll(filepath.Join(dir, Dir)); err != nil {
		t.Fatal(err)
	}
	for k := 1; k <= len(commits); k++ {
		only := make([]Commit, k) // the commits before k left zero: not replayed
		only[k-1] = commits[k-1]
		if err := tb.Write(only); err != nil {
			t.Fatalf("version %d from version %d: %v", k, k-1, err)
		}
	}
	got := metadataFiles(t, dir)
	if len(got) != len(want) {
		t.Fatalf("%d files, the replay wrote %d", len(got), len(want))
	}
	for name, b := range want {
		if !bytes.Equal(got[name], b) {
			t.Errorf("%s differs from the replay's", name)
		}
	}

	// several commits after the version read back: appends, then a
	// compaction, which reads the files of its manifests
	for k := 140; k <= len(commits); k++ {
		for _, f := range []string{"v%d.metadata.json", "snap-%d.avro", "manifest-%d.avro"} {
			os.Remove(filepath.Join(dir, Dir, fmt.Sprintf(f, k)))
		}
	}
	if err := tb.Write(append(make([]Commit, 139), commits[139:]...)); err != nil {
		t.Fatal(err)
	}
	for name, b := range want {
		if got, _ := os.ReadFile(filepath.Join(dir, Dir, name)); !bytes.Equal(got, b) {
			t.Errorf("from version 139: %s differs from the replay's", name)
		}
	}

	// a previous version that does not read whole: the log is replayed
	// (version 150 is a compaction, which reads the manifests)
	for _, c := range []struct{ name, file string }{
		{"metadata", "v149.metadata.json"},
		{"manifest list", "snap-149.avro"},
		{"manifest", "manifest-100.avro"}, // the compaction's, listed by snapshot 149
	} {
		if err := os.RemoveAll(filepath.Join(dir, Dir)); err != nil {
			t.Fatal(err)
		}
		if err := tb.Write(commits[:149]); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, Dir, c.file)
		if len(want[c.file]) == 0 {
			t.Fatalf("no %s", c.file)
		}
		if err := os.WriteFile(p, want[c.file][:len(want[c.file])/2], 0o644); err != nil {
			t.Fatal(err)
		}
		if err := tb.Write(append(make([]Commit, 149), commits[149])); err == nil {
			t.Errorf("%s cut short: version 150 was built from it", c.name)
		}
		if err := tb.Write(commits[:150]); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"v150.metadata.json", "snap-150.avro", "manifest-150.avro"} {
			if got, _ := os.ReadFile(filepath.Join(dir, Dir, f)); !bytes.Equal(got, want[f]) {
				t.Errorf("%s cut short: %s differs from the replay's", c.name, f)
			}
		}
	}
}
