package sql

import (
	"strings"
	"testing"
)

func TestPipelineSubstitutesOnce(t *testing.T) {
	for _, tc := range []struct{ name, files string }{
		{"plain", "['a.parquet']"},
		{"braces in a path", "['dir/{{files}}/x{{.parquet']"},
		{"closing braces", "['}}{{a}}']"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := Pipeline("file_rows", map[string]string{"files": tc.files})
			want := "parquet_file_metadata(" + tc.files + ");"
			if !strings.Contains(q, want) {
				t.Fatalf("query %q lacks %q", q, want)
			}
		})
	}
}

func TestPipelineUnknownPlaceholderPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic on a missing variable")
		}
	}()
	Pipeline("file_rows", map[string]string{})
}
