package store

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet/file"
)

// rowGroupStore writes the demo store again in row groups of 32 rows (12 of
// them) and returns its path.
func rowGroupStore(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "groups.parquet")
	r, err := Open("../../fixtures/stores/demo.parquet")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := Copy(t.Context(), r, path, nil, WithParquet(ParquetOptions{RowGroupRows: 32})); err != nil {
		t.Fatal(err)
	}
	return path
}

// deferredWrite writes the store at in (rowGroupStore's) through a deferred read decoding
// batch and reward into w: batch passed on as read (copied), reward as a
// new array of the same values (encoded) and written a second time as
// reward_again (the bytes of the first), the other columns copied from the
// Rest.
func deferredWrite(t *testing.T, in string, write func(sc *arrow.Schema) (func(arrow.Record, *Rest) error, func() error)) error {
	t.Helper()
	r, err := Open(in, Columns("batch", "reward"), Deferred())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	full, err := Open(in)
	if err != nil {
		t.Fatal(err)
	}
	fields := append(full.Schema().Fields(), arrow.Field{Name: "reward_again", Type: arrow.PrimitiveTypes.Float64, Nullable: true})
	full.Close()
	sc := arrow.NewSchema(fields, nil)
	each, done := write(sc)
	// Its 12 row groups, not to the end: a reader checks there that its
	// file did not change (TestCopyOfCutInputFails cuts it).
	for range 12 {
		rec, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		reward, err := array.Concatenate([]arrow.Array{rec.Column(1)}, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		out := array.NewRecord(arrow.NewSchema([]arrow.Field{rec.Schema().Field(0), rec.Schema().Field(1),
			{Name: "reward_again", Type: arrow.PrimitiveTypes.Float64, Nullable: true}}, nil),
			[]arrow.Array{rec.Column(0), reward, reward}, rec.NumRows())
		reward.Release()
		rest := r.Rest()
		err = each(out, rest)
		// The writer keeps what it needs: the caller releases both at once.
		out.Release()
		rest.Release()
		if err != nil {
			return err
		}
	}
	return done()
}

// TestPipelinedWriteSameBytes: a store written with row groups encoding
// ahead of the one being written and the input chunks copied in the
// background, at GOMAXPROCS 1, 2 and 8, has the bytes of the one written
// serially (each row group encoded and laid out before Write returns, the
// chunks copied through the buffer, one after another), and reads back as
// its input.
func TestPipelinedWriteSameBytes(t *testing.T) {
	dir := t.TempDir()
	in := rowGroupStore(t, dir)
	var serial bytes.Buffer
	err := deferredWrite(t, in, func(sc *arrow.Schema) (func(arrow.Record, *Rest) error, func() error) {
		sk, err := newParquetSink(&serial, sc, ParquetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cs := sk.(*columnSink)
		cs.window = 0
		return cs.WriteWith, cs.Close
	})
	if err != nil {
		t.Fatal(err)
	}
	if pf, err := file.NewParquetReader(bytes.NewReader(serial.Bytes())); err != nil || pf.NumRowGroups() != 12 {
		t.Fatalf("the serial file: %v, want 12 row groups", err)
	}
	for _, procs := range []int{1, 2, 8} {
		prev := runtime.GOMAXPROCS(procs)
		out := filepath.Join(dir, "out.parquet")
		err := deferredWrite(t, in, func(sc *arrow.Schema) (func(arrow.Record, *Rest) error, func() error) {
			w, err := Create(out, sc)
			if err != nil {
				t.Fatal(err)
			}
			return w.WriteWith, w.Commit
		})
		runtime.GOMAXPROCS(prev)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, serial.Bytes()) {
			t.Fatalf("GOMAXPROCS %d: %d bytes differ from the serial writer's %d", procs, len(got), serial.Len())
		}
	}
	// And the copies read back as the input.
	want, got := readRows(t, in, ""), readRows(t, filepath.Join(dir, "out.parquet"), "reward_again")
	if got != want {
		t.Fatal("the pipelined copy reads back differently from its input")
	}
}

// readRows renders a store's rows, without column skip.
func readRows(t *testing.T, path, skip string) string {
	t.Helper()
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var sb strings.Builder
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return sb.String()
		}
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			for c, f := range rec.Schema().Fields() {
				if f.Name != skip {
					sb.WriteString(rec.Column(c).ValueStr(i) + ";")
				}
			}
			sb.WriteByte('\n')
		}
	}
}

// TestCopyOfCutInputFails: an input cut inside a column chunk the writer
// copies (after its footer was read) fails the write with an error that
// names the input and the offset, and leaves no output and no temp file,
// nor any input file open.
func TestCopyOfCutInputFails(t *testing.T) {
	dir := t.TempDir()
	in := rowGroupStore(t, dir)
	pf, err := file.OpenParquetFile(in, false)
	if err != nil {
		t.Fatal(err)
	}
	last := pf.MetaData().RowGroup(pf.NumRowGroups() - 1)
	cc, err := last.ColumnChunk(pf.MetaData().Schema.ColumnIndexByName("model_version"))
	if err != nil {
		t.Fatal(err)
	}
	cut := cc.DataPageOffset() + cc.TotalCompressedSize()/2
	pf.Close()
	outDir := filepath.Join(dir, "out")
	if err := os.Mkdir(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	before := openFiles(t)
	prev := runtime.GOMAXPROCS(8)
	defer runtime.GOMAXPROCS(prev)
	out := filepath.Join(outDir, "out.parquet")
	err = deferredWrite(t, in, func(sc *arrow.Schema) (func(arrow.Record, *Rest) error, func() error) {
		w, err := Create(out, sc)
		if err != nil {
			t.Fatal(err)
		}
		// The reader has the footer: cut the file now.
		if err := os.Truncate(in, cut); err != nil {
			t.Fatal(err)
		}
		each := func(rec arrow.Record, rest *Rest) error {
			err := w.WriteWith(rec, rest)
			if err != nil {
				w.Abort()
			}
			return err
		}
		commit := func() error {
			defer w.Abort()
			return w.Commit()
		}
		return each, commit
	})
	want := in + ": ends inside a column chunk at byte " // then the offset
	if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), out+": write: ") {
		t.Fatalf("error %v, want %q…%q", err, out+": write: ", want)
	}
	if ents, _ := os.ReadDir(outDir); len(ents) != 0 {
		t.Fatalf("left %v behind", ents)
	}
	if after := openFiles(t); after != before {
		t.Errorf("%d files open after the write, %d before", after, before)
	}
}

func openFiles(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd to count open files")
	}
	return len(ents)
}

// TestAbortStopsTheWork: Abort while row groups are encoding and copying
// returns once every goroutine of the writer has, and leaves no file behind
// nor any input file open.
func TestAbortStopsTheWork(t *testing.T) {
	dir := t.TempDir()
	in := rowGroupStore(t, dir)
	prev := runtime.GOMAXPROCS(8)
	defer runtime.GOMAXPROCS(prev)
	before, files := runtime.NumGoroutine(), openFiles(t)
	out := filepath.Join(dir, "out.parquet")
	var tmp string
	err := deferredWrite(t, in, func(sc *arrow.Schema) (func(arrow.Record, *Rest) error, func() error) {
		w, err := Create(out, sc)
		if err != nil {
			t.Fatal(err)
		}
		tmp = w.TempName()
		return w.WriteWith, func() error {
			if runtime.NumGoroutine() <= before {
				t.Error("no goroutine at work before Abort: the test aborts nothing")
			}
			w.Abort()
			return nil
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	// Goroutines that have returned may take a moment to leave the count.
	for i := 0; runtime.NumGoroutine() > before && i < 100; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after Abort, %d before", n, before)
	}
	for _, p := range []string{out, tmp} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind", p)
		}
	}
	if after := openFiles(t); after != files {
		t.Errorf("%d files open after Abort, %d before", after, files)
	}
}
