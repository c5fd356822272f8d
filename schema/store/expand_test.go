package store

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/schema"
)

// TestExpandReadsEveryStoreFile: a directory store reads every store file
// below it or refuses, naming the file it would leave unread.
func TestExpandReadsEveryStoreFile(t *testing.T) {
	tests := []struct {
		name  string
		files []string
		want  []string // the files read, or
		bad   string   // the file the error names
	}{
		{"flat", []string{"a.parquet", "b.pq"}, []string{"a.parquet", "b.pq"}, ""},
		{"partitions", []string{"k=1/a.parquet", "k=2/b.parquet"}, []string{"k=1/a.parquet", "k=2/b.parquet"}, ""},
		{"left out by rule", []string{"a.parquet", "_metrics/part-0.json", "_tmp/x.parquet", ".hidden/y.parquet", "_SUCCESS", "dataset_info.json", "notes/readme.txt"}, []string{"a.parquet"}, ""},
		{"plain subdirectory", []string{"a.parquet", "sub/b.parquet"}, nil, "sub/b.parquet"},
		{"deep subdirectory", []string{"a.parquet", "sub/deeper/b.jsonl"}, nil, "sub/deeper/b.jsonl"},
		{"subdirectory under a partition", []string{"k=1/a.parquet", "k=1/x/b.parquet"}, nil, "k=1/x/b.parquet"},
		{"jsonl beside parquet", []string{"a.parquet", "b.jsonl"}, nil, "b.jsonl"},
		{"arrow beside parquet", []string{"a.parquet", "b.arrow"}, nil, "b.arrow"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range tc.files {
				p := filepath.Join(dir, f)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Expand(dir)
			if tc.bad != "" {
				if !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), filepath.Join(dir, tc.bad)) {
					t.Fatalf("got %v, want an error naming %s", err, tc.bad)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, f := range tc.want {
				want = append(want, filepath.Join(dir, f))
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
}
