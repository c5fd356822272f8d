package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/rftpipe/rftpipe/pipeline"
	"github.com/rftpipe/rftpipe/pipeline/job"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/stages/addstrategy"
	"github.com/rftpipe/rftpipe/stages/advantage"
)

func runCommand() *cli.Command {
	return &cli.Command{
		Name:  "run",
		Usage: "compute advantages (pipeline-side fn or add strategy) over a store: filter, duplicate, write advantages/returns",
		Description: "Rows keep input order (upstream groups them; compare by eid). Duplicated rows come last, with a\n" +
			"fresh suffix and duplicate_of = the input row they copy.\n\n" +
			"advantage fns: " + strings.Join(pipelineFns(), ", ") + "\n" +
			"add strategies: " + strings.Join(addstrategy.Default().Names(), ", "),
		ArgsUsage: " ",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "advantage-fn", Usage: "pipeline-side advantage fn or filter (`NAME`)"},
			&cli.StringSliceFlag{Name: "arg", Usage: "fn argument `KEY=VALUE` (repeatable), e.g. --arg std_threshold=0"},
			&cli.StringFlag{Name: "add-strategy", Usage: "run an add strategy preset (`NAME`) instead of an advantage fn"},
			&cli.StringFlag{Name: "in", Aliases: []string{"i"}, Usage: "input store (`STORE`: file, directory or glob)"},
			&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "output store (`FILE`: .parquet, .arrow, .arrows or .jsonl)"},
			&cli.StringFlag{Name: "metrics", Usage: "write the metrics as JSON to `FILE`"},
			&cli.Uint64Flag{Name: "seed", Usage: "seed of the random choices (same input and seed, same output bytes)"},
			&cli.StringFlag{Name: "on-invalid-reward", Value: pipeline.InvalidError, Usage: "null/NaN/Inf rewards: error | drop"},
			&cli.StringFlag{Name: "codec", Value: "zstd", Usage: "Parquet codec: zstd | snappy | gzip | none"},
			progressFlag(),
		}, runJobFlags()...),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("run takes no positional arguments (got %q)", c.Args().First())
			}
			if isAlgorithmJob(c) {
				return runAlgorithmJob(c)
			}
			fn, strategy := c.String("advantage-fn"), c.String("add-strategy")
			if (fn == "") == (strategy == "") {
				return usagef("give exactly one of --advantage-fn and --add-strategy")
			}
			var stages []pipeline.Stage
			var err error
			name := fn
			if strategy != "" {
				stages, err = job.StrategyStages(strategy, c.StringSlice("arg"))
				name = "add strategy " + strategy
			} else {
				stages, err = job.FnStages(fn, c.StringSlice("arg"))
			}
			if err != nil {
				return err
			}
			out := c.String("out")
			if out == "" || c.String("in") == "" {
				return usagef("give --in STORE and --out STORE")
			}
			bar := newProgress(c, "run", -1)
			res, err := pipeline.Run(c.Context, pipeline.Job{
				In: c.String("in"), Out: out, Stages: stages,
				Seed: c.Uint64("seed"), OnInvalidReward: c.String("on-invalid-reward"),
				Parquet:  store.ParquetOptions{Codec: c.String("codec")},
				Progress: bar.Add,
			})
			bar.Done()
			if err != nil {
				return err
			}
			if path := c.String("metrics"); path != "" {
				if err := writeMetrics(path, res.Metrics); err != nil {
					return err
				}
			}
			fmt.Fprintf(c.App.ErrWriter, "run: %s: %d experiences in %d groups -> %d written (%d filtered, %d invalid dropped, %d duplicated) to %s in %.1fs (%.0f/s)\n",
				name, res.In, res.Groups, res.Out, res.Filtered, res.InvalidDropped, res.Duplicated, out,
				res.Elapsed.Seconds(), float64(res.In)/res.Elapsed.Seconds())
			if res.Out == 0 && res.In > 0 {
				fmt.Fprintln(c.App.ErrWriter, "run: warning: every experience was filtered out; the output store is empty")
			}
			return nil
		},
	}
}

// pipelineFns lists the pipeline-side fns and filters of the default registry.
func pipelineFns() []string {
	var out []string
	reg := advantage.Default()
	for _, n := range reg.Names() {
		if s, err := reg.Get(n); err == nil && s.Side() == advantage.PipelineSide {
			out = append(out, n)
		}
	}
	return out
}

// writeMetrics writes metrics as one JSON object, keys sorted, atomically;
// non-finite values (which JSON cannot hold) are written as null.
func writeMetrics(path string, m map[string]float64) error {
	return store.WriteFile(path, func(w io.Writer) error { return pipeline.WriteMetrics(w, m) })
}
