package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/rftpipe/rftpipe/pipeline/builder"
	"github.com/rftpipe/rftpipe/schema"
)

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:        "bench",
		Usage:       "measure rftpipe's kernels on this machine (bench loss: a policy loss's forward and gradient)",
		Description: "Subcommands:\n   rftpipe bench loss --fn NAME [--shape BxT] [--device cpu|cuda|auto]   time a policy loss (rftpipe help bench loss)",
		Subcommands: []*cli.Command{benchLossCommand()},
	}
}

func benchLossCommand() *cli.Command {
	return &cli.Command{
		Name:  "loss",
		Usage: "time forward + gradient of a policy loss (default args) on seeded random inputs held in memory",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "fn", Required: true, Usage: "policy loss `NAME`: " + strings.Join(builder.Names(builder.PolicyLosses), ", ")},
			&cli.StringFlag{Name: "shape", Value: "1024x4096", Usage: "`BxT`: rows × tokens per row"},
			&cli.StringFlag{Name: "device", Value: "cpu", Usage: "device: cpu | cuda | auto (cuda reports the median kernel time by CUDA events and the bandwidth against a measured device-to-device copy; cpu, the wall time and the bandwidth against a copy on every core)"},
			intFlag(&cli.IntFlag{Name: "runs", Value: 9, Usage: "timed runs after one warm-up; the median is reported"}, "[1,1000]"),
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of the random inputs"},
			&cli.BoolFlag{Name: "torch", Value: true, Usage: "on cuda: also time torch eager and torch.compile on the same device (gpu/bench/torch_bench.py, embedded; needs python3 with torch) and print the ratios"},
			formatFlag(),
		},
		Action: func(c *cli.Context) error {
			format := c.String("format")
			if format != "table" && format != "json" {
				return schema.Usagef("--format %q: want table or json", format)
			}
			rows, width, err := parseShape(c.String("shape"))
			if err != nil {
				return err
			}
			r, err := builder.BenchLoss(builder.BenchOptions{Fn: c.String("fn"), Rows: rows, Width: width, Runs: c.Int("runs"),
				Seed: c.Uint64("seed"), Device: c.String("device"), Torch: c.Bool("torch"), Log: c.App.ErrWriter})
			if err != nil {
				return err
			}
			if format == "json" {
				return json.NewEncoder(c.App.Writer).Encode(r)
			}
			ratio := func(x float64) string {
				if x == 0 {
					return "-"
				}
				return fmt.Sprintf("%.2f", x)
			}
			tw := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "FN\tSHAPE\tDEVICE\tMEDIAN_MS\tMTOK/S\tGB/S\tCOPY_GB/S\tOF_COPY\tX_EAGER\tX_COMPILE")
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.3f\t%.1f\t%.1f\t%.1f\t%.2f\t%s\t%s\n", r.Fn, r.Shape, r.Device, r.MedianMs, r.MtokPerS,
				r.GBPerS, r.CopyGBPerS, r.CopyFraction, ratio(r.XEager), ratio(r.XCompile))
			return tw.Flush()
		},
	}
}

// maxBenchTokens bounds B×T of `bench loss --shape`: the inputs and the
// gradient are held in memory, some 50 bytes a token (on the CPU, beside
// the two 256 MiB buffers of the copy the bandwidth floor is measured by).
const maxBenchTokens = 1 << 26

// parseShape parses "BxT" with B, T >= 1.
func parseShape(s string) (rows, width int, err error) {
	bs, ts, ok := strings.Cut(strings.ToLower(s), "x")
	if ok {
		rows, err = strconv.Atoi(bs)
		if err == nil {
			width, err = strconv.Atoi(ts)
		}
	}
	if !ok || err != nil || rows < 1 || width < 1 {
		return 0, 0, schema.Usagef("--shape %q: want BxT, e.g. 1024x4096", s)
	}
	if int64(rows)*int64(width) > maxBenchTokens {
		return 0, 0, schema.Usagef("--shape %q: %d tokens; at most %d (B×T) are held in memory", s, int64(rows)*int64(width), maxBenchTokens)
	}
	return rows, width, nil
}
