package iceberg

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkWriteVersion times writing the newest metadata version of a log
// of RFTPIPE_BENCH_COMMITS commits (1,000 by default; -short 100): appends
// of one data file each, a compaction every 50th commit and an expiry
// after it, the versions before already written.
func BenchmarkWriteVersion(b *testing.B) {
	n := 1000
	if testing.Short() {
		n = 100
	}
	if s := os.Getenv("RFTPIPE_BENCH_COMMITS"); s != "" {
		fmt.Sscan(s, &n)
	}
	commits := benchCommits(n)
	dir := b.TempDir()
	t := &Table{Dir: dir, UUID: UUID([]byte("bench")), Partition: "experiment", Version: "model_version", WriteFile: writeFile}
	if err := t.Write(commits[:n-1]); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		for _, f := range []string{fmt.Sprintf("v%d.metadata.json", n), fmt.Sprintf("snap-%d.avro", n), fmt.Sprintf("manifest-%d.avro", n)} {
			os.Remove(filepath.Join(dir, Dir, f))
		}
		b.StartTimer()
		if err := t.Write(commits); err != nil {
			b.Fatal(err)
		}
	}
}

// benchCommits returns n commits: appends of one file, every 50th a
// compaction of the files appended since the last, then an expiry.
func benchCommits(n int) []Commit {
	at := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	v := int64(1)
	cols := []Column{{"experiment", "utf8"}, {"model_version", "int64"}, {"reward", "float64"}, {"logprobs", "list<item: float32, nullable>"}}
	var out []Commit
	var live []string
	for len(out) < n {
		k := len(out) + 1
		c := Commit{Time: at.Add(time.Duration(k) * time.Second)}
		switch {
		case k%50 == 0 && len(live) > 1:
			c.Operation, c.Removed = "compact", live
			f := File{Path: fmt.Sprintf("data/c%d.parquet", k), Experiment: "a", Rows: int64(len(live)) * 8, Size: 4096, MinVersion: &v, MaxVersion: &v}
			c.Added, live = []File{f}, []string{f.Path}
		case k%50 == 1 && k > 1:
			c.Operation, c.ExpiredBefore = "expire", int64(k-1)
		default:
			c.Operation = "append"
			f := File{Path: fmt.Sprintf("data/%d.parquet", k), Experiment: fmt.Sprintf("e%d", k%3), Rows: 8, Size: 1024, MinVersion: &v, MaxVersion: &v}
			c.Added, live = []File{f}, append(live, f.Path)
		}
		if k == 1 {
			c.Columns = cols
		}
		out = append(out, c)
	}
	return out
}

// writeFile writes a file in place (the benchmark's WriteFile).
func writeFile(path string, data []byte, _ bool) error { return os.WriteFile(path, data, 0o644) }
