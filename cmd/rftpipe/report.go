package main

import (
	"fmt"
	"io"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/sql/duckdb"
	sqlreport "github.com/rftpipe/rftpipe/sql/report"
)

func reportCommand() *cli.Command {
	return &cli.Command{
		Name:  "report",
		Usage: "render a store as one self-contained HTML page: key numbers and plots",
		Description: "Rewards, per-group reward std with GRPO's std_threshold marked, groups filtered or duplicated,\n" +
			"response lengths and (after `rftpipe run`) advantages; images are inlined, so the page is one file.",
		ArgsUsage: " ",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "in", Aliases: []string{"i"}, Required: true, Usage: "the experience `STORE` (file, directory or glob)"},
			&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Required: true, Usage: "the HTML `FILE` to write (atomically)"},
			&cli.Float64Flag{Name: "std-threshold", Value: 0, Usage: "GRPO std_threshold to mark: groups with reward std <= it are dropped"},
			&cli.IntFlag{Name: "bins", Value: 40, Usage: "bins per histogram"},
			threadsFlag(),
			memoryLimitFlag(),
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("report takes no arguments (use --in STORE --out FILE)")
			}
			if c.Int("bins") < 1 {
				return usagef("--bins must be >= 1")
			}
			in, out := c.String("in"), c.String("out")
			if err := checkNotStore(out, []duckdb.Store{{Path: in}}); err != nil {
				return err
			}
			start := time.Now()
			o := sqlreport.Options{
				Store: in, StdThreshold: c.Float64("std-threshold"), Bins: c.Int("bins"),
				Threads: c.Int("threads"), MemoryLimit: c.String("memory-limit"),
			}
			var size int64
			err := store.WriteFile(out, func(w io.Writer) error {
				cw := &countingWriter{w: w}
				err := sqlreport.Write(c.Context, o, cw)
				size = cw.n
				return err
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(c.App.ErrWriter, "report: wrote %s (%.1f KiB) in %.1fs\n", out, float64(size)/1024, time.Since(start).Seconds())
			return nil
		},
	}
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
