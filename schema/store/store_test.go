package store_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/schema/synth"
)

const demo = "../../fixtures/stores/demo.parquet"

// readAll returns every row of a store rendered as JSON lines, so stores in
// different formats can be compared value by value.
func readAll(t *testing.T, path string, opts ...store.ReadOption) (string, *arrow.Schema) {
	t.Helper()
	r, err := store.Open(path, opts...)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	defer r.Close()
	var buf bytes.Buffer
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			for c := 0; c < int(rec.NumCols()); c++ {
				buf.WriteString(rec.ColumnName(c) + "=" + rec.Column(c).ValueStr(i) + ";")
			}
			buf.WriteByte('\n')
		}
	}
	return buf.String(), r.Schema()
}

func copyTo(t *testing.T, in, out string) {
	t.Helper()
	r, err := store.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w, err := store.Create(out, r.Schema(), store.NotOver(in))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

func TestRoundTripFormats(t *testing.T) {
	want, ws := readAll(t, demo)
	dir := t.TempDir()
	for _, name := range []string{"a.jsonl", "a.arrow", "a.arrows", "a.parquet"} {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(dir, name)
			copyTo(t, demo, out)
			got, gs := readAll(t, out)
			if got != want {
				t.Errorf("%s: rows differ after a round trip", name)
			}
			if !store.SameColumns(gs, ws) {
				t.Errorf("%s: schema %v, want %v", name, gs, ws)
			}
			// and back to Parquet
			back := filepath.Join(dir, "back-"+strings.ReplaceAll(name, ".", "-")+".parquet")
			copyTo(t, out, back)
			if got, _ := readAll(t, back); got != want {
				t.Errorf("%s -> parquet: rows differ", name)
			}
		})
	}
}

func TestDirectoryAndGlob(t *testing.T) {
	dir := t.TempDir()
	copyTo(t, demo, filepath.Join(dir, "part-0.parquet"))
	copyTo(t, demo, filepath.Join(dir, "part-1.parquet"))
	one, _ := readAll(t, demo)
	for _, p := range []string{dir, filepath.Join(dir, "part-*.parquet")} {
		got, _ := readAll(t, p)
		if got != one+one {
			t.Errorf("%s: want both parts in order", p)
		}
	}
}

func TestProjectionAndPos(t *testing.T) {
	r, err := store.Open(demo, store.Columns(schema.Task, schema.Reward), store.BatchRows(100))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if n := r.Schema().NumFields(); n != 2 {
		t.Fatalf("projected schema has %d fields", n)
	}
	var rows int64
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		_, fileRow, storeRow := r.Pos()
		if fileRow != rows || storeRow != rows {
			t.Fatalf("Pos = %d/%d, want %d", fileRow, storeRow, rows)
		}
		rows += rec.NumRows()
	}
	if rows != 384 {
		t.Fatalf("rows = %d", rows)
	}
}

func TestWriterIsAtomic(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.parquet")
	s := schema.New(schema.Task)
	w, err := store.Create(out, s)
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewInt64Builder(memory.DefaultAllocator)
	b.AppendValues([]int64{1, 2, 3}, nil)
	rec := array.NewRecord(s, []arrow.Array{b.NewArray()}, 3)
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatal("target exists before Commit")
	}
	w.Abort()
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("Abort left %v behind", ents)
	}
}

// TestWriterPrepare: Prepare finishes the file without renaming it; a write
// after it is refused, Abort then leaves nothing, Commit renames it.
func TestWriterPrepare(t *testing.T) {
	s := schema.New(schema.Task)
	b := array.NewInt64Builder(memory.DefaultAllocator)
	b.AppendValues([]int64{1, 2, 3}, nil)
	rec := array.NewRecord(s, []arrow.Array{b.NewArray()}, 3)
	for _, commit := range []bool{false, true} {
		dir := t.TempDir()
		out := filepath.Join(dir, "out.parquet")
		if table := "sqlite:///" + filepath.Join(dir, "b.db") + "?table=t"; commit {
			// A buffer table too refuses a write once prepared.
			w, err := store.Create(table, s)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Prepare(); err != nil {
				t.Fatal(err)
			}
			if err := w.Write(rec); err == nil || !strings.Contains(err.Error(), "the store is finished") {
				t.Fatalf("Write to a table after Prepare: %v", err)
			}
			w.Abort()
		}
		w, err := store.Create(out, s)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		if err := w.Prepare(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Fatal("target exists after Prepare")
		}
		if err := w.Write(rec); err == nil {
			t.Fatal("Write after Prepare succeeded")
		}
		if !commit {
			w.Abort()
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Fatalf("Abort after Prepare left %v behind", ents)
			}
			continue
		}
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
		r, err := store.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		n := int64(0)
		if err := r.ForEach(context.Background(), func(rec arrow.Record) error { n += rec.NumRows(); return nil }); err != nil {
			t.Fatal(err)
		}
		r.Close()
		if n != 3 {
			t.Errorf("committed %d rows, want 3", n)
		}
	}
}

func TestWriterRefusesInputsAndMissingDirs(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.parquet")
	copyTo(t, demo, in)
	sum := sha(t, in)
	link := filepath.Join(dir, "link.parquet")
	if err := os.Symlink(in, link); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{in, link, filepath.Join(dir, ".", "in.parquet")} {
		if _, err := store.Create(out, schema.New(schema.Task), store.NotOver(in)); !errors.Is(err, schema.ErrBadInput) {
			t.Errorf("Create(%s) over its input: err = %v", out, err)
		}
	}
	if _, err := store.Create(filepath.Join(dir, "nodir", "x.parquet"), schema.New(schema.Task)); !errors.Is(err, schema.ErrBadInput) {
		t.Errorf("missing directory: err = %v", err)
	}
	if sha(t, in) != sum {
		t.Error("input changed")
	}
}

func sha(t *testing.T, path string) [32]byte {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

func TestBadStores(t *testing.T) {
	tests := []struct {
		file, want string
	}{
		{"empty.parquet", "not a readable Parquet file"},
		{"garbage.parquet", "not a readable Parquet file"},
		{"truncated.parquet", "not a readable Parquet file"},
		{"flipped_footer.parquet", "not a readable Parquet file"},
		{"empty.jsonl", "empty store"},
		{"not_json.jsonl", "not a JSON object"},
		{"wrong_type.jsonl", `column "reward": want a number`},
		{"missing.parquet", "no such file"},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join("../../fixtures/bad", tc.file)
			err := drain(path)
			if !errors.Is(err, schema.ErrBadInput) {
				t.Fatalf("err = %v, want bad input", err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.file) {
				t.Errorf("err = %q, want it to name %s and say %q", err, tc.file, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("multi-line error %q", err)
			}
		})
	}
}

func drain(path string) error {
	r, err := store.Open(path)
	if err != nil {
		return err
	}
	defer r.Close()
	for {
		if _, err := r.Next(); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
	}
}

func TestSynthIsDeterministic(t *testing.T) {
	cfg := synth.Default()
	cfg.Tasks, cfg.RespMin, cfg.RespMax, cfg.ChunkRows, cfg.Kind = 40, 8, 40, 64, synth.Multi
	dir := t.TempDir()
	var sums [][32]byte
	for i := 0; i < 2; i++ {
		out := filepath.Join(dir, "g"+string(rune('0'+i))+".parquet")
		w, err := store.Create(out, cfg.Schema())
		if err != nil {
			t.Fatal(err)
		}
		if err := synth.Generate(context.Background(), cfg, w.Write); err != nil {
			t.Fatal(err)
		}
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
		sums = append(sums, sha(t, out))
	}
	if sums[0] != sums[1] {
		t.Fatal("same seed, different bytes")
	}
}

// TestCorruptCopiesLeakNothing reads copies of the demo store with a byte
// flipped at offsets spread over the whole file: each read ends or fails as
// bad input, and no file stays open afterwards (an open that panicked once
// leaked its descriptor).
func TestCorruptCopiesLeakNothing(t *testing.T) {
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skip("no /proc/self/fd to count open files")
		}
		return len(ents)
	}
	orig, err := os.ReadFile("../../fixtures/stores/demo.parquet")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "flipped.parquet")
	before := fds()
	failed := 0
	for i := 0; i < 300; i++ {
		b := bytes.Clone(orig)
		b[i*len(b)/300] ^= 0xA5
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := drain(path); err != nil {
			if !errors.Is(err, schema.ErrBadInput) {
				t.Fatalf("flip at %d: error is not bad input: %v", i*len(b)/300, err)
			}
			failed++
		}
	}
	if after := fds(); after != before {
		t.Errorf("%d files open after the reads, %d before", after, before)
	}
	if failed == 0 {
		t.Error("no flipped copy failed to read: the test flips nothing that matters")
	}
	t.Logf("%d of 300 flipped copies failed as bad input", failed)
}

// TestMutatedCopiesFailCleanly reads 1000 copies of the demo store with one
// to four bytes changed at seeded random places (page headers, pages, column
// chunk metadata, the footer's Arrow schema): each read ends or fails as bad
// input, never with a panic or an allocation the size a corrupt length
// claims (a fuzzer found both, in arrow-go's column-reader goroutines and in
// the Arrow schema's message body).
func TestMutatedCopiesFailCleanly(t *testing.T) {
	orig, err := os.ReadFile("../../fixtures/stores/demo.parquet")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	path := filepath.Join(t.TempDir(), "mutated.parquet")
	for k := 0; k < 1000; k++ {
		b := bytes.Clone(orig)
		for m := 0; m < 1+rng.IntN(4); m++ {
			b[rng.IntN(len(b))] = byte(rng.IntN(256))
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := drain(path); err != nil && !errors.Is(err, schema.ErrBadInput) {
			t.Fatalf("copy %d: error is not bad input: %v", k, err)
		}
	}
}

func TestColumnDiff(t *testing.T) {
	s := func(names ...string) *arrow.Schema { return schema.New(names...) }
	for _, c := range []struct {
		a, b     *arrow.Schema
		col, why string
	}{
		{s(schema.Batch, schema.Reward), s(schema.Batch, schema.Reward), "", ""},
		{s(schema.Batch), s(schema.Batch, schema.Reward), schema.Reward, "the column is only in this file"},
		{s(schema.Batch, schema.Reward), s(schema.Batch), schema.Reward, "the column is missing in this file"},
		{s(schema.Batch, schema.Reward), s(schema.Reward, schema.Batch), schema.Reward, "column 0 in this file, 1 there"},
		{s(schema.Batch), arrow.NewSchema([]arrow.Field{{Name: schema.Batch, Type: arrow.BinaryTypes.String}}, nil),
			schema.Batch, "type utf8 in this file, int64 there"},
	} {
		if col, why := store.ColumnDiff(c.a, c.b); col != c.col || why != c.why {
			t.Errorf("ColumnDiff(%v, %v) = %q, %q; want %q, %q", c.a, c.b, col, why, c.col, c.why)
		}
	}
}

// TestBufferMetadataKept: a Parquet, Arrow or JSONL file keeps the buffer
// metadata (trinity.schema_type, trinity.layout) a buffer's read sets, as
// far as its format holds it; values no read sets and other keys are
// dropped; a store of several files keeps none (its files may disagree).
func TestBufferMetadataKept(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, keys, vals []string) string {
		md := arrow.NewMetadata(keys, vals)
		s := arrow.NewSchema(schema.New(schema.Task).Fields(), &md)
		b := array.NewInt64Builder(memory.DefaultAllocator)
		b.AppendValues([]int64{1, 2}, nil)
		rec := array.NewRecord(s, []arrow.Array{b.NewArray()}, 2)
		p := filepath.Join(dir, name)
		w, err := store.Create(p, s)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
		return p
	}
	metaOf := func(path string) map[string]string {
		r, err := store.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		m := map[string]string{}
		md := r.Schema().Metadata()
		for i, k := range md.Keys() {
			m[k] = md.Values()[i]
		}
		return m
	}
	keys := []string{"trinity.schema_type", "trinity.layout", "pandas"}
	for _, tc := range []struct {
		name string
		vals []string
		want map[string]string
	}{
		{"a.parquet", []string{"sft", "0.6", "{}"}, map[string]string{"trinity.schema_type": "sft", "trinity.layout": "0.6"}},
		{"a.arrow", []string{"dpo", "mixed", "{}"}, map[string]string{"trinity.schema_type": "dpo", "trinity.layout": "mixed"}},
		{"b.parquet", []string{"rows", "0.7", "{}"}, map[string]string{}},
		{"c.jsonl", []string{"sft", "0.6", "{}"}, map[string]string{}},
	} {
		if got := metaOf(write(tc.name, keys, tc.vals)); !maps.Equal(got, tc.want) {
			t.Errorf("%s written with %v: read %v, want %v", tc.name, tc.vals, got, tc.want)
		}
	}
	parts := filepath.Join(dir, "parts")
	if err := os.Mkdir(parts, 0o755); err != nil {
		t.Fatal(err)
	}
	dir = parts
	write("part-0.parquet", keys[:2], []string{"experience", "0.5"})
	write("part-1.parquet", keys[:2], []string{"dpo", "0.6"})
	if got := metaOf(parts); len(got) != 0 {
		t.Errorf("a store of two files kept %v", got)
	}
}
