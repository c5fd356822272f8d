package store_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/schema/synth"
)

// genStore writes a seeded synthetic store of tasks×8 rows at path, in row
// groups (or IPC batches) of 1000 rows.
func genStore(t *testing.T, path string, tasks int) {
	t.Helper()
	cfg := synth.Default()
	// One explore batch: records (row groups) of 1000 rows.
	cfg.Tasks, cfg.TasksPerBatch, cfg.RespMin, cfg.RespMax, cfg.ChunkRows = tasks, tasks, 16, 16, 1000
	w, err := store.Create(path, cfg.Schema())
	if err != nil {
		t.Fatal(err)
	}
	if err := synth.Generate(context.Background(), cfg, w.Write); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

// wantLoss checks that reading path fails as bad input naming the file and
// saying want, on one line.
func wantLoss(t *testing.T, path, want string) {
	t.Helper()
	err := drain(path)
	if err == nil {
		t.Fatalf("%s read as a valid store", path)
	}
	if !errors.Is(err, schema.ErrBadInput) || errors.Is(err, io.EOF) {
		t.Fatalf("err = %v, want bad input (and not io.EOF)", err)
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("err = %q, want one line naming %s and saying %q", err, path, want)
	}
}

// TestParquetCutDataFails: a Parquet file whose footer is intact but whose
// data pages are cut short or overwritten must fail, naming the row group,
// never read as a shorter store.
func TestParquetCutDataFails(t *testing.T) {
	dir := t.TempDir()
	orig := filepath.Join(dir, "orig.parquet")
	genStore(t, orig, 500) // 4000 rows, 4 row groups
	b, err := os.ReadFile(orig)
	if err != nil {
		t.Fatal(err)
	}
	n := int(binary.LittleEndian.Uint32(b[len(b)-8:]))
	footer := b[len(b)-8-n:]
	data := b[:len(b)-8-n]
	for _, tc := range []struct {
		name string
		body []byte
		want string
	}{
		{"data cut in half", data[:len(data)/2], "row group"},
		{"data cut near the end", data[:len(data)-100], "row group"},
		{"data zeroed in the middle", zero(data, len(data)/3, len(data)/3+4096), "row group"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "cut.parquet")
			if err := os.WriteFile(path, append(append([]byte{}, tc.body...), footer...), 0o644); err != nil {
				t.Fatal(err)
			}
			wantLoss(t, path, tc.want)
		})
	}
}

func zero(b []byte, lo, hi int) []byte {
	c := append([]byte{}, b...)
	for i := lo; i < hi; i++ {
		c[i] = 0
	}
	return c
}

// TestIPCStreamWithoutEndMarkerFails: a stream cut at a message boundary
// lacks its end-of-stream marker.
func TestIPCStreamWithoutEndMarkerFails(t *testing.T) {
	dir := t.TempDir()
	orig := filepath.Join(dir, "s.arrows")
	genStore(t, orig, 300)
	b, err := os.ReadFile(orig)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "cut.arrows")
	if err := os.WriteFile(path, b[:len(b)-8], 0o644); err != nil {
		t.Fatal(err)
	}
	wantLoss(t, path, "end-of-stream marker")
	if err := os.WriteFile(path, b[:len(b)-1000], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := drain(path); !errors.Is(err, schema.ErrBadInput) {
		t.Fatalf("stream cut mid-message: err = %v, want bad input", err)
	}
	if err := drain(orig); err != nil {
		t.Fatalf("intact stream: %v", err)
	}
}

// TestIPCFileWithoutFooterFails: an Arrow IPC file is read through its
// footer; without one it is refused.
func TestIPCFileWithoutFooterFails(t *testing.T) {
	dir := t.TempDir()
	orig := filepath.Join(dir, "f.arrow")
	genStore(t, orig, 300)
	b, err := os.ReadFile(orig)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "cut.arrow")
	if err := os.WriteFile(path, b[:len(b)-20], 0o644); err != nil {
		t.Fatal(err)
	}
	wantLoss(t, path, "Arrow IPC")
}

// TestChangedWhileReadFails: for every reader, a file appended to or
// rewritten after the first batch was read fails at the end instead of
// giving a shorter or longer result.
func TestChangedWhileReadFails(t *testing.T) {
	for _, ext := range []string{"parquet", "arrow", "arrows", "jsonl"} {
		for _, change := range []string{"append", "truncate"} {
			t.Run(ext+"/"+change, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "s."+ext)
				genStore(t, path, 300)
				r, err := store.Open(path, store.BatchRows(500))
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				if _, err := r.Next(); err != nil {
					t.Fatal(err)
				}
				f, err := os.OpenFile(path, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				st, _ := f.Stat()
				if change == "append" {
					_, err = f.WriteAt([]byte("\n"), st.Size())
				} else {
					err = f.Truncate(st.Size() - 1)
				}
				f.Close()
				if err != nil {
					t.Fatal(err)
				}
				for {
					_, err = r.Next()
					if err != nil {
						break
					}
				}
				if err == io.EOF || !errors.Is(err, schema.ErrBadInput) {
					t.Fatalf("err = %v, want bad input", err)
				}
			})
		}
	}
}

// TestJSONLAppendedWhileRead: records appended to a JSONL store while it is
// read are an error (they once overran the engine's buffers).
func TestJSONLAppendedWhileRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	genStore(t, path, 100)
	line, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	first := line[:strings.IndexByte(string(line), '\n')+1]
	r, err := store.Open(path, store.BatchRows(100))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		f.Write(first)
	}
	f.Close()
	rows := int64(100)
	for {
		rec, err := r.Next()
		if err != nil {
			if err == io.EOF || !strings.Contains(err.Error(), "changed while it was read") {
				t.Fatalf("after %d rows: err = %v, want a changed-file error", rows, err)
			}
			break
		}
		rows += rec.NumRows()
	}
	if rows > 800 {
		t.Fatalf("read %d rows of an 800-row store", rows)
	}
}
