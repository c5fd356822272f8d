package trinity_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v17/arrow"

	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/schema/synth"
	"github.com/rftpipe/rftpipe/schema/trinity"
)

// BenchmarkImportSQLite reads a buffer of 1,000,000 experiences of 256
// tokens (128 prompt + 128 response, with log-probs and mask), written by
// rftpipe's writer into a temp SQLite file first, through store.Open — what
// every command does with a sqlite:// store — once per layout: 0.5 (one
// table) and 0.6 (metadata + blob table, read with one join). It reports
// experiences/s and the peak RSS of the reads (the high-water mark is reset
// after the file is written). RFTPIPE_BENCH_ROWS sets another size; -short
// uses 50,000.
func BenchmarkImportSQLite(b *testing.B) {
	for _, lay := range []trinity.Layout{trinity.Layout05, trinity.Layout06} {
		b.Run("layout="+string(lay), func(b *testing.B) { benchImport(b, lay) })
	}
}

func benchImport(b *testing.B, lay trinity.Layout) {
	rows := 1_000_000
	if testing.Short() {
		rows = 50_000
	}
	if s := os.Getenv("RFTPIPE_BENCH_ROWS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 8 {
			b.Fatalf("RFTPIPE_BENCH_ROWS=%q", s)
		}
		rows = n
	}
	url := benchBuffer(b, rows, lay)
	resetPeakRSS()
	b.ResetTimer()
	var n int64
	for i := 0; i < b.N; i++ {
		r, err := store.Open(url)
		if err != nil {
			b.Fatal(err)
		}
		err = r.ForEach(context.Background(), func(rec arrow.Record) error {
			n += rec.NumRows()
			return nil
		})
		r.Close()
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if n != int64(rows/8*8)*int64(b.N) {
		b.Fatalf("read %d rows, want %d", n, rows/8*8*b.N)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "experiences/s")
	if kb := peakRSSKiB(); kb > 0 {
		b.ReportMetric(float64(kb)/1024, "peak-RSS-MiB")
	}
}

// benchBuffers caches the generated buffers by size: the benchmark
// function runs more than once per benchmark.
var benchBuffers = map[string]string{}

func benchBuffer(b *testing.B, rows int, lay trinity.Layout) string {
	key := strconv.Itoa(rows) + "/" + string(lay)
	if url, ok := benchBuffers[key]; ok {
		return url
	}
	dir, err := os.MkdirTemp("", "rftpipe-bench-")
	if err != nil {
		b.Fatal(err)
	}
	benchCleanup = append(benchCleanup, func() { os.RemoveAll(dir) })
	url := sqliteURL(filepath.Join(dir, "buffer.db"), "experience_buffer")
	cfg := synth.Default()
	cfg.Runs, cfg.Tasks, cfg.PromptLen, cfg.RespMin, cfg.RespMax = 8, rows/8, 128, 128, 128
	start := time.Now()
	w, err := trinity.Create(context.Background(), url+"&layout="+string(lay), cfg.Schema(), trinity.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if err := synth.Generate(context.Background(), cfg, w.Write); err != nil {
		b.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		b.Fatal(err)
	}
	b.Logf("wrote %d experiences in %.1fs (%.0f/s)", w.Rows(), time.Since(start).Seconds(), float64(w.Rows())/time.Since(start).Seconds())
	benchBuffers[key] = url
	return url
}

// resetPeakRSS resets the process's RSS high-water mark (Linux).
func resetPeakRSS() { os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSSKiB returns VmHWM from /proc/self/status (0 when unknown).
func peakRSSKiB() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return n
		}
	}
	return 0
}
