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
// every command does with a sqlite:// store — in each layout: 0.5 (one
// table) and 0.6 (metadata + blob table, read with one join). The two reads
// take turns for three rounds and each keeps its fastest time; it reports
// experiences/s of each, the 0.6 rate as a ratio to the 0.5 rate measured
// in the same run, and the peak RSS of the reads (the high-water mark is
// reset after the files are written). RFTPIPE_BENCH_ROWS sets another size;
// -short uses 50,000.
func BenchmarkImportSQLite(b *testing.B) {
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
	layouts := []trinity.Layout{trinity.Layout05, trinity.Layout06}
	urls := map[trinity.Layout]string{}
	for _, lay := range layouts {
		urls[lay] = benchBuffer(b, rows, lay)
	}
	resetPeakRSS()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		times := map[trinity.Layout]float64{}
		for range 3 {
			for _, lay := range layouts {
				start := time.Now()
				if n := readAll(b, urls[lay]); n != int64(rows/8*8) {
					b.Fatalf("layout %s: read %d rows, want %d", lay, n, rows/8*8)
				}
				if d := time.Since(start).Seconds(); times[lay] == 0 || d < times[lay] {
					times[lay] = d
				}
			}
		}
		b.ReportMetric(float64(rows/8*8)/times[trinity.Layout05], "0.5_exp/s")
		b.ReportMetric(float64(rows/8*8)/times[trinity.Layout06], "0.6_exp/s")
		b.ReportMetric(times[trinity.Layout05]/times[trinity.Layout06], "0.6/0.5")
	}
	if kb := peakRSSKiB(); kb > 0 {
		b.ReportMetric(float64(kb)/1024, "peak-RSS-MiB")
	}
}

// readAll reads the store at url through store.Open and returns its rows.
func readAll(b *testing.B, url string) int64 {
	r, err := store.Open(url)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	var n int64
	if err := r.ForEach(context.Background(), func(rec arrow.Record) error {
		n += rec.NumRows()
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	return n
}

// benchBuffers caches the generated buffers by size and layout: the
// benchmark function runs more than once per benchmark.
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
