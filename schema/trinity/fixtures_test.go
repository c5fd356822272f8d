package trinity_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/schema/trinity"
)

const fixtures = "../../fixtures/trinity"

// The buffers written by upstream's own code and the rows an import must
// give (fixtures/trinity/README.md says how they were made).
var buffers = []struct {
	name, table string
	kind        trinity.Kind
	rows        int
}{
	{"experience", "experience_buffer", trinity.KindExperience, 64},
	{"multistep", "experience_buffer", trinity.KindExperience, 48},
	{"dpo", "dpo_buffer", trinity.KindDPO, 16},
	{"sft", "sft_buffer", trinity.KindSFT, 16},
	{"overrides", "experience_buffer", trinity.KindExperience, 8},
}

func sqliteURL(path, table string) string {
	abs, _ := filepath.Abs(path)
	return "sqlite:///" + abs + "?table=" + table
}

// jsonCols hold JSON text: compared as parsed JSON, ints and floats apart.
var jsonCols = map[string]bool{
	schema.Info: true, schema.Metrics: true, trinity.ColMessages: true, trinity.ColTools: true,
	trinity.ColCustomFields: true, trinity.ColChosenMessages: true, trinity.ColRejectedMessages: true,
}

// table is a store read into memory: its schema and one map per row.
type table struct {
	schema *arrow.Schema
	rows   []map[string]any
}

func readStore(t *testing.T, path string, opts ...store.ReadOption) table {
	t.Helper()
	r, err := store.Open(path, opts...)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer r.Close()
	tb := table{schema: r.Schema()}
	err = r.ForEach(context.Background(), func(rec arrow.Record) error {
		for i := 0; i < int(rec.NumRows()); i++ {
			row := map[string]any{}
			for c, f := range rec.Schema().Fields() {
				row[f.Name] = value(t, f.Name, rec.Column(c), i)
			}
			tb.rows = append(tb.rows, row)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return tb
}

// value returns element i of a column as plain Go values: int64, float64
// (bit patterns for float32 lists), string, bool, []any, parsed JSON.
func value(t *testing.T, name string, a arrow.Array, i int) any {
	if a.IsNull(i) {
		return nil
	}
	switch c := a.(type) {
	case *array.Int64:
		return c.Value(i)
	case *array.Int32:
		return int64(c.Value(i))
	case *array.Int16:
		return int64(c.Value(i))
	case *array.Float64:
		return math.Float64bits(c.Value(i))
	case *array.Float32:
		return math.Float32bits(c.Value(i))
	case *array.Boolean:
		return c.Value(i)
	case *array.String:
		if jsonCols[name] {
			return parseJSON(t, c.Value(i))
		}
		return c.Value(i)
	case *array.List:
		lo, hi := c.ValueOffsets(i)
		out := []any{}
		for k := lo; k < hi; k++ {
			out = append(out, value(t, name, c.ListValues(), int(k)))
		}
		return out
	}
	t.Fatalf("column %s: unexpected type %s", name, a.DataType())
	return nil
}

// parseJSON parses JSON text keeping integers and floats distinct.
func parseJSON(t *testing.T, s string) any {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("JSON %q: %v", s, err)
	}
	return numbers(v)
}

func numbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if strings.ContainsAny(string(x), ".eE") {
			f, _ := x.Float64()
			return fmt.Sprintf("float %v", f)
		}
		return "int " + string(x)
	case []any:
		for i := range x {
			x[i] = numbers(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = numbers(x[k])
		}
	}
	return v
}

// sameRows checks that got holds exactly want's rows: every column of want
// with equal values (and equal types), and any further column of got null
// in every row.
func sameRows(t *testing.T, got, want table) {
	t.Helper()
	if len(got.rows) != len(want.rows) {
		t.Fatalf("%d rows, want %d", len(got.rows), len(want.rows))
	}
	for _, f := range want.schema.Fields() {
		idx := got.schema.FieldIndices(f.Name)
		if len(idx) == 0 {
			t.Fatalf("column %s missing (have %v)", f.Name, got.schema)
		}
		if g := got.schema.Field(idx[0]).Type; !arrow.TypeEqual(g, f.Type) {
			t.Errorf("column %s: type %s, want %s", f.Name, g, f.Type)
		}
	}
	for i := range want.rows {
		for name, w := range want.rows[i] {
			if g := got.rows[i][name]; !reflect.DeepEqual(g, w) {
				t.Errorf("row %d column %s: got %v, want %v", i, name, g, w)
			}
		}
		for name, g := range got.rows[i] {
			if _, ok := want.rows[i][name]; !ok && g != nil {
				t.Errorf("row %d column %s: got %v, want null (absent from the reference)", i, name, g)
			}
		}
	}
}

func TestImportFixtures(t *testing.T) {
	for _, b := range buffers {
		t.Run(b.name, func(t *testing.T) {
			want := readStore(t, filepath.Join(fixtures, b.name+".jsonl"))
			got := readStore(t, sqliteURL(filepath.Join(fixtures, b.name+".db"), b.table), store.BatchRows(5))
			if len(got.rows) != b.rows {
				t.Fatalf("%d rows, want %d", len(got.rows), b.rows)
			}
			sameRows(t, got, want)
		})
	}
}

// TestConvertFixtures writes each companion JSONL into a new buffer, as
// `rftpipe convert STORE sqlite:///…` does, and reads it back.
func TestConvertFixtures(t *testing.T) {
	for _, b := range buffers {
		t.Run(b.name, func(t *testing.T) {
			want := readStore(t, filepath.Join(fixtures, b.name+".jsonl"))
			url := sqliteURL(filepath.Join(t.TempDir(), "new.db"), "T") + "&schema_type=" + string(b.kind)
			copyStore(t, filepath.Join(fixtures, b.name+".jsonl"), url)
			sameRows(t, readStore(t, url), want)
		})
	}
}

func copyStore(t *testing.T, in, out string) int64 {
	t.Helper()
	r, err := store.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n, err := store.Copy(context.Background(), r, out, nil, store.NotOver(in))
	if err != nil {
		t.Fatalf("copy %s -> %s: %v", in, out, err)
	}
	return n
}

// TestEdgeBuffers: payloads an importer must refuse on purpose, with the
// table, the row id and the field.
func TestEdgeBuffers(t *testing.T) {
	for _, tc := range []struct {
		file, table string
		want        []string
	}{
		{"edge/legacy.db", "experience_buffer", []string{"table experience_buffer, id 1", `column "experience_bytes"`, "legacy pickle payload"}},
		{"edge/multimodal.db", "experience_buffer", []string{"row 1", "table experience_buffer, id 2", `column "multi_modal_inputs"`}},
		{"edge/bad.db", "experience_buffer", []string{"row 0", "table experience_buffer, id 1", `column "experience_bytes"`, `magic "TRXQ"`}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			url := sqliteURL(filepath.Join(fixtures, tc.file), tc.table)
			err := readErr(url)
			if err == nil {
				t.Fatal("read without error")
			}
			if !errors.Is(err, schema.ErrBadInput) {
				t.Errorf("not bad input (exit 2): %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func readErr(url string) error {
	r, err := store.Open(url, store.BatchRows(1))
	if err != nil {
		return err
	}
	defer r.Close()
	return r.ForEach(context.Background(), func(arrow.Record) error { return nil })
}

// TestMultimodalRowsWithout: the rows of multimodal.db without inputs read
// as the JSONL has them (rows 1 and 3 of the table).
func TestMultimodalFirstRow(t *testing.T) {
	r, err := store.Open(sqliteURL(filepath.Join(fixtures, "edge/multimodal.db"), "experience_buffer"), store.BatchRows(1))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rec, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	want := readStore(t, filepath.Join(fixtures, "edge/multimodal.jsonl"))
	var got table
	got.schema = rec.Schema()
	row := map[string]any{}
	for c, f := range rec.Schema().Fields() {
		row[f.Name] = value(t, f.Name, rec.Column(c), 0)
	}
	got.rows = []map[string]any{row}
	want.rows = want.rows[:1]
	sameRows(t, got, want)
}

func TestWriteRefusesTheTableBeingRead(t *testing.T) {
	dir := t.TempDir()
	url := sqliteURL(filepath.Join(dir, "b.db"), "T")
	copyStore(t, filepath.Join(fixtures, "experience.jsonl"), url)
	same := "sqlite:///" + filepath.Join(dir, ".", "b.db") + "?table=T"
	r, err := store.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = store.Copy(context.Background(), r, same, nil, store.NotOver(url))
	if err == nil || !strings.Contains(err.Error(), "table being read") {
		t.Fatalf("got %v, want a refusal", err)
	}
	// Another table of the same file is fine.
	if _, err := store.Copy(context.Background(), r, sqliteURL(filepath.Join(dir, "b.db"), "U"), nil, store.NotOver(url)); err != nil {
		t.Fatal(err)
	}
}

// TestWriteIsAtomic: a row that cannot be written leaves nothing behind —
// no table in an existing file, no file where there was none.
func TestWriteIsAtomic(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.db")
	copyStore(t, filepath.Join(fixtures, "experience.jsonl"), sqliteURL(good, "T"))
	// A store whose 3rd row has no response: upstream's reader could not
	// load it, so the writer refuses it.
	bad := filepath.Join(dir, "bad.jsonl")
	var lines bytes.Buffer
	for i := 0; i < 3; i++ {
		plen := 3
		if i == 2 {
			plen = 4
		}
		fmt.Fprintf(&lines, `{"eid":{"batch":0,"task":%d,"run":0,"step":0,"suffix":"s"},"reward":1.0,"prompt_length":%d,"tokens":[1,2,3,4],"logprobs":[-0.5]}`+"\n", i, plen)
	}
	writeFile(t, bad, lines.Bytes())
	for _, target := range []string{sqliteURL(good, "U"), sqliteURL(filepath.Join(dir, "new.db"), "T")} {
		r, err := store.Open(bad)
		if err != nil {
			t.Fatal(err)
		}
		_, err = store.Copy(context.Background(), r, target, nil)
		r.Close()
		if err == nil || !strings.Contains(err.Error(), "row 2") || !strings.Contains(err.Error(), `column "tokens"`) {
			t.Fatalf("%s: got %v, want a row 2 tokens error", target, err)
		}
		if !errors.Is(err, schema.ErrBadInput) {
			t.Errorf("not bad input: %v", err)
		}
	}
	if err := readErr(sqliteURL(good, "U")); err == nil || !strings.Contains(err.Error(), "no such table") {
		t.Errorf("table U after a failed write: %v", err)
	}
	if _, err := store.Expand(filepath.Join(dir, "new.db")); err == nil {
		t.Errorf("new.db exists after a failed write")
	}
	if got := readStore(t, sqliteURL(good, "T")); len(got.rows) != 64 {
		t.Errorf("table T has %d rows after another table's failed write", len(got.rows))
	}
}

// TestIfExists: a table that holds rows is refused, appended to or replaced.
func TestIfExists(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(fixtures, "overrides.jsonl")
	url := sqliteURL(filepath.Join(dir, "b.db"), "T")
	copyStore(t, in, url)
	r, _ := store.Open(in)
	_, err := store.Copy(context.Background(), r, url, nil)
	r.Close()
	if err == nil || !strings.Contains(err.Error(), "already holds 8 rows") {
		t.Fatalf("got %v, want a refusal", err)
	}
	copyStore(t, in, url+"&if_exists=append")
	if n := len(readStore(t, url).rows); n != 16 {
		t.Errorf("append: %d rows, want 16", n)
	}
	copyStore(t, in, url+"&if_exists=replace")
	sameRows(t, readStore(t, url), readStore(t, in))
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func storeBatch(n int) store.ReadOption { return store.BatchRows(n) }

func openStore(t *testing.T, path string) *store.Reader {
	t.Helper()
	r, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// copyErr copies r into out, refusing to write over the given inputs.
func copyErr(r *store.Reader, out string, notOver ...string) (int64, error) {
	return store.Copy(context.Background(), r, out, nil, store.NotOver(notOver...))
}

// TestStoreRoundTrip: store → buffer (SQLite and PostgreSQL) → store keeps
// every column the format carries. Two changes are upstream's: an
// experience table's task_id column is text, so task reads back as a
// string (keys compare as strings: the same groups); and info holds the
// model version (upstream's experience writer needs info["model_version"],
// and dpo and sft rows keep it there only).
func TestStoreRoundTrip(t *testing.T) {
	for _, name := range []string{"demo.parquet", "multi.parquet", "dpo.parquet"} {
		in := filepath.Join("../../fixtures/stores", name)
		orig := readStore(t, in)
		dpo := len(orig.schema.FieldIndices(schema.Chosen)) > 0
		want := table{schema: orig.schema}
		for _, row := range orig.rows {
			w := map[string]any{}
			for k, v := range row {
				w[k] = v
			}
			if !dpo {
				w[schema.Task] = fmt.Sprint(row[schema.Task])
			}
			if mv := row[schema.ModelVersion]; mv != nil || !dpo {
				info, _ := row[schema.Info].(map[string]any)
				if info == nil {
					info = map[string]any{}
				}
				info["model_version"] = numbers(json.Number(fmt.Sprint(row[schema.ModelVersion])))
				w[schema.Info] = info
			}
			want.rows = append(want.rows, w)
		}
		fields := orig.schema.Fields()
		for i := range fields {
			if fields[i].Name == schema.Task && !dpo {
				fields[i].Type = arrow.BinaryTypes.String
			}
		}
		want.schema = arrow.NewSchema(fields, nil)
		targets := map[string]func() string{
			"sqlite":   func() string { return sqliteURL(filepath.Join(t.TempDir(), "b.db"), "T") },
			"postgres": func() string { return pgURL(t, "store_"+strings.TrimSuffix(name, ".parquet")) },
		}
		for backend, target := range targets {
			t.Run(name+"/"+backend, func(t *testing.T) {
				url := target()
				if n := copyStore(t, in, url); n != int64(len(orig.rows)) {
					t.Fatalf("wrote %d rows, want %d", n, len(orig.rows))
				}
				sameRows(t, readStore(t, url), want)
			})
		}
	}
}
