package main

import (
	"fmt"
	"io"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rftpipe/rftpipe/schema"

	"github.com/rftpipe/rftpipe/schema/store"
	sqlreport "github.com/rftpipe/rftpipe/sql/report"
)

func reportCommand() *cli.Command {
	return &cli.Command{
		Name:  "report",
		Usage: "render a store as one self-contained HTML page: key numbers and plots",
		Description: "Rewards, per-group reward std with GRPO's std_threshold marked, groups filtered or duplicated,\n" +
			"response lengths and (after `rftpipe run`) advantages; images are inlined, so the page is one file.",
		ArgsUsage: "STORE",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "in", Aliases: []string{"i"}, Usage: "the experience `STORE` (file, directory, glob or Trinity buffer URL: sqlite:///F.db?table=T, postgresql://HOST/DB?table=T), if not given as the argument"},
			&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Required: true, Usage: "the HTML `FILE` to write (atomically)"},
			floatFlag(&cli.Float64Flag{Name: "std-threshold", Value: 0, Usage: "GRPO std_threshold to mark: groups with reward std <= it are dropped"}, schema.Finite),
			intFlag(&cli.IntFlag{Name: "bins", Value: 40, Usage: "bins per histogram"}, "[1,1000]"),
			threadsFlag(),
			memoryLimitFlag(),
			progressFlag(),
		}, cacheFlags()...),
		Action: func(c *cli.Context) error {
			in := c.String("in")
			switch {
			case c.NArg() > 1:
				return schema.Usagef("report takes one STORE")
			case c.NArg() == 1 && in != "":
				return schema.Usagef("report: give the store once, as the argument or with --in")
			case c.NArg() == 1:
				in = c.Args().First()
			case in == "":
				return schema.Usagef("report needs a STORE (rftpipe report STORE --out FILE)")
			}
			out := c.String("out")
			if err := store.CheckOutputs(c.Context, []string{in}, []store.Output{{Flag: "--out", Path: out}}, false); err != nil {
				return err
			}
			start := time.Now()
			o := sqlreport.Options{
				Store: in, StdThreshold: c.Float64("std-threshold"), Bins: c.Int("bins"),
				Threads: c.Int("threads"), MemoryLimit: c.String("memory-limit"),
			}
			o.Cache.Dir, o.Cache.Limit = cacheOf(c)
			bar := newProgress(c, "report", -1)
			o.Progress = func(done, total int) { bar.Set(done, total) }
			var warnings []string
			o.Warn = func(w string) { warnings = append(warnings, w) }
			var size int64
			err := store.WriteFile(c.Context, out, func(w io.Writer) error {
				cw := &countingWriter{w: w}
				err := sqlreport.Write(c.Context, o, cw)
				size = cw.n
				return err
			})
			bar.Done()
			if err != nil {
				return err
			}
			printWarnings(c, "report", warnings)
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
