package pipeline

import (
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v17/arrow/array"

	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/stages/operator"
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

// A job whose stages drop rows reads deferred when it keeps no rejected
// rows: its output has the same bytes as the same job's decoded read (a
// rejected-rows store turns deferral off) over stores of one and of several
// row groups, some of which lose no row; and a kept row whose undecoded column is bad input is an
// error naming the file, the row and the column.
func TestDroppingJobDeferred(t *testing.T) {
	dir := t.TempDir()
	full := filepath.Join("..", "fixtures", "stores", "full.parquet")
	groups := filepath.Join(dir, "groups.parquet") // row groups of 50 rows
	rewrite(t, full, groups, 50, nil)
	dapo := func(job Job) Job {
		var ops []Operator
		for _, name := range []string{"mask_response_truncated", "dapo_dynamic_sampling"} {
			op, err := operator.New(operator.Default(), name, nil)
			if err != nil {
				t.Fatal(err)
			}
			ops = append(ops, Operator{Name: name, Op: op})
		}
		job = withFn(t, job, "grpo", "")
		job.Stages = append([]Stage{Operators(ops)}, job.Stages...)
		return job
	}
	filter := func(job Job) Job { return withFn(t, job, "grpo", "", "std_threshold=0") }
	deferrable := func(job Job) bool {
		r, err := store.Open(job.In)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		d, _, err := deferredReader(&job, r, newColumns(r.Files()[0], r.Schema(), nil))
		if err != nil {
			t.Fatal(err)
		}
		if d != nil {
			d.Close()
		}
		return d != nil
	}
	// Row groups larger than a batch: a decoded read cuts them in batches,
	// and so writes smaller row groups than a deferred read would.
	if deferrable(filter(Job{In: full, Out: filepath.Join(dir, "o.parquet"), BatchRows: 50})) {
		t.Fatal("a job that drops rows reads deferred the row groups of 256 rows it reads in batches of 50")
	}
	// gigpo.parquet: the filter drops no row of its first row group.
	for _, in := range []string{full, groups, filepath.Join("..", "fixtures", "stores", "gigpo.parquet")} {
		for name, mk := range map[string]func(Job) Job{"dapo": dapo, "grpo_filter": filter} {
			deferred := mk(Job{In: in, Out: filepath.Join(dir, name+".parquet"), BatchRows: 256})
			decoded := mk(Job{In: in, Out: filepath.Join(dir, name+"_decoded.parquet"), BatchRows: 256, Rejected: filepath.Join(dir, name+"_rejected.parquet")})
			if !deferrable(deferred) {
				t.Fatalf("%s over %s: not read deferred", name, in)
			}
			res, err := Run(context.Background(), deferred)
			if err != nil {
				t.Fatal(err)
			}
			if res.Filtered == 0 || res.Out == 0 {
				t.Fatalf("%s over %s: %d rows out, %d filtered: want some of each", name, in, res.Out, res.Filtered)
			}
			if _, err := Run(context.Background(), decoded); err != nil {
				t.Fatal(err)
			}
			if fileSHA(t, deferred.Out) != fileSHA(t, decoded.Out) {
				t.Fatalf("%s over %s: the deferred read's output differs from the decoded read's", name, in)
			}
		}
	}
	// A NaN log-prob under the mask in the last row of the second row
	// group: the filter keeps it (its group's rewards differ).
	bad := filepath.Join(dir, "bad.parquet")
	rewrite(t, full, bad, 50, func(col string, row int) bool { return col == "logprobs" && row == 99 })
	_, err := Run(context.Background(), filter(Job{In: bad, Out: filepath.Join(dir, "bad_out.parquet"), BatchRows: 256}))
	if err == nil || !strings.Contains(err.Error(), "bad.parquet") || !strings.Contains(err.Error(), "row 99") || !strings.Contains(err.Error(), "logprobs") {
		t.Fatalf("a NaN log-prob in row 99: %v", err)
	}
}

// rewrite copies the store in to out in row groups of rows rows, with NaN
// as the first value of the list column col of row i where nan(col, i).
func rewrite(t *testing.T, in, out string, rows int64, nan func(col string, row int) bool) {
	t.Helper()
	r, err := store.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w, err := store.Create(out, r.Schema(), store.WithParquet(store.ParquetOptions{RowGroupRows: rows}))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	row := 0
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; nan != nil && i < int(rec.NumRows()); i++ {
			for c, f := range rec.Schema().Fields() {
				if l, ok := rec.Column(c).(*array.List); ok && nan(f.Name, row+i) {
					lo, _ := l.ValueOffsets(i)
					// The decoded values' buffer is the reader's own: set in place.
					l.ListValues().(*array.Float32).Float32Values()[lo] = float32(math.NaN())
				}
			}
		}
		row += int(rec.NumRows())
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

func fileSHA(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}
