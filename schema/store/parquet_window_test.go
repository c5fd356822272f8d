package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/rftpipe/rftpipe/schema/synth"
)

// windowStore writes a seeded store of 2400 rows in row groups of 250
// (the last one shorter), every column of the schema.
func windowStore(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "window.parquet")
	cfg := synth.Default()
	cfg.Tasks, cfg.TasksPerBatch, cfg.RespMin, cfg.RespMax, cfg.ChunkRows = 300, 50, 8, 24, 250
	w, err := Create(path, cfg.Schema())
	if err != nil {
		t.Fatal(err)
	}
	if err := synth.Generate(context.Background(), cfg, w.Write); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	return path
}

// readLog reads path to its end or first error with GOMAXPROCS procs and
// returns, batch by batch, its position and rows rendered as text, then the
// error (if any).
func readLog(t *testing.T, path string, procs int, opts ...ReadOption) []string {
	t.Helper()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	r, err := Open(path, append([]ReadOption{BatchRows(100)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var log []string
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return log
		}
		if err != nil {
			return append(log, "error: "+err.Error())
		}
		_, fileRow, storeRow := r.Pos()
		var b strings.Builder
		fmt.Fprintf(&b, "batch at %d/%d of %d rows, %d skipped\n", fileRow, storeRow, rec.NumRows(), r.Skipped())
		for i := 0; i < int(rec.NumRows()); i++ {
			for c := 0; c < int(rec.NumCols()); c++ {
				b.WriteString(rec.ColumnName(c) + "=" + rec.Column(c).ValueStr(i) + ";")
			}
			b.WriteByte('\n')
		}
		log = append(log, b.String())
	}
}

// TestParquetRowGroupsInFlight: a store read with several row groups
// decoded at once (GOMAXPROCS 8) yields the same batches, in the same
// order and at the same positions, as one read a row group at a time
// (GOMAXPROCS 1); so does a read that skips row groups, and a damaged
// row group fails after the same batches with the same error.
func TestParquetRowGroupsInFlight(t *testing.T) {
	path := windowStore(t)
	skipOdd := SkipRowGroups("batch", func(r Range) bool { return r.MinInt%2 == 0 })
	damaged := filepath.Join(t.TempDir(), "damaged.parquet")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Zero 4 KiB in the middle of the data: a row group in the middle fails.
	mid := len(b) / 3
	if err := os.WriteFile(damaged, append(append(append([]byte{}, b[:mid]...), make([]byte, 4096)...), b[mid+4096:]...), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		path string
		opts []ReadOption
		want func(log []string) error
	}{
		{"whole", path, nil, func(log []string) error {
			if len(log) != 29 || strings.HasPrefix(log[len(log)-1], "error") {
				return fmt.Errorf("%d batches, want 29 and no error", len(log))
			}
			return nil
		}},
		{"columns", path, []ReadOption{Columns("task", "reward", "logprobs")}, nil},
		{"skipping", path, []ReadOption{skipOdd}, func(log []string) error {
			if last := log[len(log)-1]; !strings.HasPrefix(last, "batch at 1950/1950 of 50 rows, 800 skipped\n") {
				return fmt.Errorf("last batch %.60q, want rows 1950-1999, 800 rows skipped before them", last)
			}
			return nil
		}},
		{"damaged", damaged, nil, func(log []string) error {
			if last := log[len(log)-1]; len(log) < 2 || !strings.Contains(last, "error: ") || !strings.Contains(last, "row group") {
				return fmt.Errorf("%d batches ending %.80q, want some batches then a row group's error", len(log), last)
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			one := readLog(t, tc.path, 1, tc.opts...)
			eight := readLog(t, tc.path, 8, tc.opts...)
			if len(one) == 0 {
				t.Fatal("read nothing")
			}
			if tc.want != nil {
				if err := tc.want(one); err != nil {
					t.Fatal(err)
				}
			}
			if len(one) != len(eight) {
				t.Fatalf("%d batches at GOMAXPROCS 1, %d at 8", len(one), len(eight))
			}
			for i := range one {
				if one[i] != eight[i] {
					t.Fatalf("batch %d differs:\nGOMAXPROCS 1: %.200s\nGOMAXPROCS 8: %.200s", i, one[i], eight[i])
				}
			}
		})
	}
}

// TestParquetStopMidRead: a read decodes no more row groups at once than
// it may, and stopped mid-file, by its context or by Close, leaves no
// decoding goroutine behind and every buffer released.
func TestParquetStopMidRead(t *testing.T) {
	path := windowStore(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
	if rowGroupsInFlight() < 2 {
		t.Fatalf("%d row groups in flight at GOMAXPROCS 8", rowGroupsInFlight())
	}
	for _, cancel := range []bool{true, false} {
		t.Run(fmt.Sprintf("cancel=%v", cancel), func(t *testing.T) {
			before := runtime.NumGoroutine()
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			s, err := openParquet(path, readConfig{batchRows: 100, mem: mem, bytes: new(atomic.Int64), ctx: ctx, rowGroupsInFlight: 4})
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 4; i++ {
				if _, err := s.Next(); err != nil {
					t.Fatal(err)
				}
				if ps := s.(*parquetSource); len(ps.ahead)+1 > 4 {
					t.Fatalf("%d row groups decoded at once, want at most 4", len(ps.ahead)+1)
				}
			}
			if cancel {
				stop()
				for {
					_, err := s.Next()
					if err == nil {
						continue // decoded before the cancel
					}
					if !errors.Is(err, context.Canceled) {
						t.Fatalf("after cancel: err = %v, want context.Canceled", err)
					}
					break
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			mem.AssertSize(t, 0)
			deadline := time.Now().Add(5 * time.Second)
			for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if n := runtime.NumGoroutine(); n > before {
				var b strings.Builder
				pprof.Lookup("goroutine").WriteTo(&b, 1)
				t.Fatalf("%d goroutines after Close, %d before the read:\n%s", n, before, b.String())
			}
		})
	}
}
