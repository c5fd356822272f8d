package pipeline

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/schema/store"
)

// rowsOf renders every row of a store, column by column.
func rowsOf(t *testing.T, path string) string {
	t.Helper()
	r, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var b strings.Builder
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return b.String()
		}
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			for c := 0; c < int(rec.NumCols()); c++ {
				b.WriteString(rec.ColumnName(c) + "=" + rec.Column(c).ValueStr(i) + ";")
			}
			b.WriteByte('\n')
		}
	}
}

// A Parquet output (deferred: unchanged columns copied as bytes, batches
// with dropped or copied rows decoded) holds the same rows as an Arrow
// output (every column decoded), for jobs that pass rows through, drop them
// and copy them.
func TestDeferredMatchesDecoded(t *testing.T) {
	in := filepath.Join("..", "fixtures", "stores", "demo.parquet")
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		args []string
	}{
		{"grpo", nil},
		{"grpo_dup", []string{"std_threshold=0", "duplicate_experiences=true"}},
	} {
		outs := map[string]string{}
		for _, ext := range []string{".parquet", ".arrows"} {
			out := filepath.Join(dir, c.name+ext)
			job := withFn(t, Job{In: in, Out: out, Seed: 3}, "grpo", "", c.args...)
			if _, err := Run(context.Background(), job); err != nil {
				t.Fatal(err)
			}
			outs[ext] = rowsOf(t, out)
		}
		if outs[".parquet"] != outs[".arrows"] {
			t.Fatalf("%s: the Parquet output differs from the Arrow one", c.name)
		}
	}
}
