package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/rftpipe/rftpipe/pipeline"
	"github.com/rftpipe/rftpipe/pipeline/job"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/stages/addstrategy"
	"github.com/rftpipe/rftpipe/stages/advantage"
	"github.com/rftpipe/rftpipe/stages/agg"
)

func runCommand() *cli.Command {
	return &cli.Command{
		Name:  "run",
		Usage: "compute advantages over a store (an advantage fn, an add strategy or an algorithm preset): filter, duplicate, write advantages/returns",
		Description: "Rows keep input order (upstream groups them; compare by eid). Duplicated rows come last, with a\n" +
			"fresh suffix and duplicate_of = the input row they copy.\n\n" +
			fnHelp() + "An argument outside its range (∈ interval; none: any finite number) is refused (exit 2).\n" +
			"add strategies: " + strings.Join(addstrategy.Default().Names(), ", "),
		ArgsUsage: " ",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "advantage-fn", Usage: "advantage fn or filter (`NAME`, listed below)"},
			&cli.StringSliceFlag{Name: "arg", Usage: "fn argument `KEY=VALUE` (repeatable), e.g. --arg std_threshold=0"},
			&cli.StringFlag{Name: "add-strategy", Usage: "run an add strategy preset (`NAME`) instead of an advantage fn"},
			&cli.StringFlag{Name: "in", Aliases: []string{"i"}, Usage: "input store (`STORE`: file, directory, glob or Trinity buffer URL)"},
			&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "output store (`FILE`: .parquet, .arrow, .arrows, .jsonl or a Trinity buffer URL; a directory with --shards)"},
			&cli.Uint64Flag{Name: "seed", Usage: "seed of the random choices (same input and seed, same output bytes)"},
			&cli.StringFlag{Name: "on-invalid-reward", Value: pipeline.InvalidError, Usage: "null/NaN/Inf rewards: error | drop"},
			&cli.StringFlag{Name: "codec", Value: "zstd", Usage: "Parquet codec: zstd | snappy | gzip | none"},
			&cli.BoolFlag{Name: "allow-inside-input", Usage: "write the output inside the input store's directory (refused by default: the next read would take it for part of the store)"},
			progressFlag(),
		}, append(append(monitorFlags(), algorithmFlags()...), shardFlags()...)...),
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
			label := fn
			if strategy != "" {
				label = "add_strategy/" + strategy
			}
			return monitored(c, label, c.String("metrics"), c.String("prom"), func() (agg.Metrics, error) {
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
					return nil, err
				}
				out := c.String("out")
				if out == "" || c.String("in") == "" {
					return nil, usagef("give --in STORE and --out STORE")
				}
				sh, err := shardOf(c)
				if err != nil {
					return nil, err
				}
				part := out
				if sh != nil {
					if part, err = partOut(out, *sh); err != nil {
						return nil, err
					}
				}
				bar := newProgress(c, "run", -1)
				res, err := pipeline.Run(c.Context, pipeline.Job{
					In: c.String("in"), Out: part, Stages: stages, Shard: sh,
					Seed: c.Uint64("seed"), OnInvalidReward: c.String("on-invalid-reward"),
					Parquet:  store.ParquetOptions{Codec: c.String("codec")},
					Progress: bar.Add, Total: bar.Total, InsideInput: c.Bool("allow-inside-input"),
				})
				bar.Done()
				if err != nil {
					return nil, err
				}
				if sh != nil {
					if err := writePart(out, *sh, label, res); err != nil {
						return nil, err
					}
				}
				fmt.Fprintf(c.App.ErrWriter, "run: %s: %d experiences in %d groups -> %d written (%d filtered, %d invalid dropped, %d duplicated) to %s in %.1fs (%.0f/s)\n",
					name, res.In, res.Groups, res.Out, res.Filtered, res.InvalidDropped, res.Duplicated, part,
					res.Elapsed.Seconds(), float64(res.In)/res.Elapsed.Seconds())
				printWarnings(c, "run", res.Warnings)
				if res.Out == 0 && res.In > 0 {
					fmt.Fprintln(c.App.ErrWriter, "run: warning: every experience was filtered out; the output store is empty")
				}
				return res.Metrics, nil
			})
		},
	}
}

// fnHelp lists the advantage fns with their arguments, defaults (upstream's
// default_args(); "-" for an argument left to the constructor) and valid
// ranges (∈ interval; none: any finite number), pipeline-side ones first.
func fnHelp() string {
	var b strings.Builder
	reg := advantage.Default()
	for _, side := range []advantage.Side{advantage.PipelineSide, advantage.TrainerSide} {
		if side == advantage.PipelineSide {
			b.WriteString("pipeline-side advantage fns and filters (run on the experiences, as Trinity's experience pipeline):\n")
		} else {
			b.WriteString("trainer-side advantage fns (run over the store as one trainer batch, after the KL penalty of an\n" +
				"algorithm job; they read the trainer's columns, e.g. ppo reads values):\n")
		}
		for _, n := range reg.Names() {
			spec, _ := reg.Get(n)
			if spec.Side() != side {
				continue
			}
			var args []string
			def := spec.Defaults()
			for _, p := range spec.Params {
				v, ok := def[p.Name]
				if !ok {
					v = p.Ctor
				}
				if v == nil {
					v = "-"
				}
				if p.Range != "" {
					v = fmt.Sprintf("%v∈%s", v, p.Range)
				}
				args = append(args, fmt.Sprintf("%s=%v", p.Name, v))
			}
			fmt.Fprintf(&b, "  %-22s %s\n", n, strings.Join(args, " "))
		}
	}
	return b.String()
}
