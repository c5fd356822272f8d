//go:build unix

package view

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/schema/synth"
)

var (
	benchRows  = flag.Int("view-rows", 100_000, "experiences in BenchmarkView's store (a multiple of 8)")
	benchStore = flag.String("view-store", "", "BenchmarkView's store, generated beforehand as it would generate it (-view-rows its rows)")
)

// BenchmarkView measures the viewer over a generated store of -view-rows
// experiences (8 runs a task, 512 tasks a step, 16 prompt and 16–48
// response tokens, with advantages and entropy): open then the first page
// (the index's first pass), open until the index is complete (both
// passes), and each later page on a complete index, all through HTTP.
//
//	go test -run '^$' -bench View -benchtime 5x ./sql/view/
//	go test -run '^$' -bench View -benchtime 5x ./sql/view/ -args -view-rows 1000000
//
// or over a store made once by the same generator:
//
//	rftpipe gen --tasks 125000 --runs 8 --tasks-per-batch 512 --prompt-len 16 --resp-len 16:48 --with advantages,entropy --out /tmp/m1.parquet
//	go test -run '^$' -bench View -benchtime 5x ./sql/view/ -args -view-rows 1000000 -view-store /tmp/m1.parquet
func BenchmarkView(b *testing.B) {
	cfg := synth.Default()
	cfg.Tasks, cfg.Runs, cfg.TasksPerBatch = *benchRows/8, 8, 512
	cfg.PromptLen, cfg.RespMin, cfg.RespMax = 16, 16, 48
	cfg.With = []string{"advantages", "entropy"}
	path := *benchStore
	if path == "" {
		path = filepath.Join(b.TempDir(), "bench.parquet")
		w, err := store.Create(path, cfg.Schema())
		if err != nil {
			b.Fatal(err)
		}
		if err := synth.Generate(context.Background(), cfg, w.Write); err != nil {
			b.Fatal(err)
		}
		if err := w.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	// cpu reports the process's CPU time per op (DuckDB's threads
	// included) beside the wall time, which a loaded machine inflates.
	cpu := func(b *testing.B, f func()) {
		var before, after syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &before)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			f()
		}
		b.StopTimer()
		syscall.Getrusage(syscall.RUSAGE_SELF, &after)
		used := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
		b.ReportMetric(float64(used.Milliseconds())/float64(b.N), "cpu-ms/op")
	}
	fetch := func(b *testing.B, h http.Handler, url string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, url, nil))
		if rec.Code != http.StatusOK {
			b.Fatalf("%s: status %d: %s", url, rec.Code, rec.Body)
		}
		io.Copy(io.Discard, rec.Body)
	}

	b.Run("open+first-page", func(b *testing.B) {
		cpu(b, func() {
			v, err := Open(ctx, Options{Store: path})
			if err != nil {
				b.Fatal(err)
			}
			fetch(b, v, "/")
			v.Close()
		})
	})
	b.Run("open+index", func(b *testing.B) {
		cpu(b, func() {
			v, err := Open(ctx, Options{Store: path})
			if err != nil {
				b.Fatal(err)
			}
			if err := v.Wait(ctx); err != nil {
				b.Fatal(err)
			}
			v.Close()
		})
	})

	v, err := Open(ctx, Options{Store: path})
	if err != nil {
		b.Fatal(err)
	}
	defer v.Close()
	if err := v.Wait(ctx); err != nil {
		b.Fatal(err)
	}
	if v.n != int64(*benchRows) {
		b.Fatalf("indexed %d rows, want %d", v.n, *benchRows)
	}
	last := (*benchRows/8 - 1) / cfg.TasksPerBatch
	for _, c := range []struct{ name, url string }{
		{"overview", "/"},
		{"steps-page-2-by-reward", "/?page=2&sort=reward_mean&dir=desc"},
		{"step", fmt.Sprintf("/step?batch=%d&sort=reward_std", last)},
		{"step-page-5-filtered", "/step?batch=0&status=kept&page=5"},
		{"group", fmt.Sprintf("/group?batch=%d&task=7", last)},
		{"rollout", fmt.Sprintf("/rollout?id=%d&color=entropy", *benchRows-3)},
		{"search-tokens", "/search?mode=tokens&q=17+4"},
		{"search-tokens-page-2", fmt.Sprintf("/search?mode=tokens&q=17+4&from=%d", searchRows)},
	} {
		b.Run(c.name, func(b *testing.B) {
			cpu(b, func() { fetch(b, v, c.url) })
		})
	}
}
