package store_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
)

// layout makes the files (relative paths) in a new directory, each a copy
// of src (or empty when src is ""), and returns the directory.
func layout(t *testing.T, src string, files ...string) string {
	t.Helper()
	dir := t.TempDir()
	var b []byte
	if src != "" {
		var err error
		if b, err = os.ReadFile(src); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestPartitions(t *testing.T) {
	type col struct {
		name  string
		typ   arrow.DataType
		value []string
		null  []bool
	}
	i64, str := arrow.PrimitiveTypes.Int64, arrow.BinaryTypes.String
	for _, c := range []struct {
		name, glob string
		files      []string
		want       []col
		err        string
	}{
		{"integers", "", []string{"batch=0/part-0.parquet", "batch=10/part-0.parquet"},
			[]col{{"batch", i64, []string{"0", "10"}, []bool{false, false}}}, ""},
		{"one value not an integer", "", []string{"task=1/a.parquet", "task=x/a.parquet"},
			[]col{{"task", str, []string{"1", "x"}, []bool{false, false}}}, ""},
		{"url-decoded, Hive's null", "", []string{"task=a%20b/a.parquet", "task=__HIVE_DEFAULT_PARTITION__/a.parquet"},
			[]col{{"task", str, []string{"__HIVE_DEFAULT_PARTITION__", "a b"}, []bool{true, false}}}, ""},
		{"two levels", "", []string{"batch=0/task=3/a.parquet", "batch=1/task=4/a.parquet"},
			[]col{{"batch", i64, []string{"0", "1"}, []bool{false, false}}, {"task", i64, []string{"3", "4"}, []bool{false, false}}}, ""},
		{"a glob across them", "*/*.parquet", []string{"batch=0/a.parquet", "batch=1/a.parquet"},
			[]col{{"batch", i64, []string{"0", "1"}, []bool{false, false}}}, ""},
		{"not partitioned", "", []string{"a.parquet", "b.parquet"}, nil, ""},
		{"keys differ", "", []string{"batch=0/a.parquet", "task=0/a.parquet"}, nil, `column "task": partition directories differ`},
		{"a file outside", "", []string{"a.parquet", "batch=0/a.parquet"}, nil, `batch=0/a.parquet: column "batch": partition directories differ`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := layout(t, "", c.files...)
			path := dir
			if c.glob != "" {
				path = filepath.Join(dir, c.glob)
			}
			files, err := store.Expand(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(files) != len(c.files) {
				t.Fatalf("Expand: %v", files)
			}
			parts, err := store.Partitions(path, files)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []col
			for _, p := range parts {
				got = append(got, col{p.Name, p.Type, p.Value, p.Null})
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}

// TestPartitionColumnInFile: a partition key the files hold too must
// agree with the directory on every row, else one line names the row.
func TestPartitionColumnInFile(t *testing.T) {
	base := "../../fixtures/foreign/base.parquet" // every step is 0
	want, wantSchema := readAll(t, base)
	got, gotSchema := readAll(t, layout(t, base, "step=0/a.parquet"))
	if got != want || !store.SameColumns(gotSchema, wantSchema) {
		t.Fatal("an agreeing partition changed the rows")
	}
	// A key the file lacks comes last, in its canonical type.
	_, s := readAll(t, layout(t, base, "run_group=x/a.parquet", "run_group=y/b.parquet"))
	if f := s.Field(s.NumFields() - 1); f.Name != "run_group" || f.Type.ID() != arrow.STRING {
		t.Fatalf("last column %v", f)
	}
	r, err := store.Open(layout(t, base, "step=1/a.parquet"))
	if err == nil {
		_, err = r.Next()
		r.Close()
	}
	if err == nil || !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), `a.parquet: row 0: column "step": value 0 differs from the partition directory's step=1`) {
		t.Fatalf("err = %v", err)
	}
}
