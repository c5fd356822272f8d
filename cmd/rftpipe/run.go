package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/rftpipe/rftpipe/pipeline/builder"
	"github.com/rftpipe/rftpipe/schema"
)

func runCommand() *cli.Command {
	return &cli.Command{
		Name:  "run",
		Usage: "compute advantages over a store (an advantage fn, an add strategy or an algorithm preset): filter, duplicate, write advantages/returns",
		Description: "Rows keep input order (upstream groups them; compare by eid). Duplicated rows come last, with a\n" +
			"fresh suffix and duplicate_of = the input row they copy.\n\n" +
			builder.AdvantageHelp() + "add strategies: " + strings.Join(builder.Names(builder.AddStrategies), ", ") + "\n" +
			"experience operators (--operator, or a config's data_processor.experience_pipeline.operators): " +
			strings.Join(builder.Names(builder.Operators), ", "),
		ArgsUsage: " ",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "advantage-fn", Usage: "advantage fn or filter (`NAME`, listed below)"},
			&cli.StringSliceFlag{Name: "arg", Usage: "fn argument `KEY=VALUE` (repeatable), e.g. --arg std_threshold=0; an operator's: NAME.KEY=VALUE, e.g. --arg dapo_dynamic_sampling.metric_key=acc"},
			&cli.StringSliceFlag{Name: "operator", Usage: "experience operator `NAME` (repeatable, run in order before the fn; listed below)"},
			&cli.StringSliceFlag{Name: "skip-operator", Usage: "do not run the job file's experience operator `NAME` (repeatable; an operator rftpipe does not know is an error unless skipped); each skip is reported"},
			&cli.StringFlag{Name: "rejected", Usage: "store (`FILE` or Trinity buffer URL) of every dropped row, unchanged, with drop_reason and dropped_by (with --shards a directory of parts, REJ/part-I.parquet); the output is the same with or without it"},
			&cli.StringFlag{Name: "add-strategy", Usage: "run an add strategy preset (`NAME`) instead of an advantage fn"},
			&cli.StringFlag{Name: "in", Aliases: []string{"i"}, Usage: "input store (`STORE`: file, directory, glob or Trinity buffer URL)"},
			&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "output store (`FILE`: .parquet, .arrow, .arrows, .jsonl or a Trinity buffer URL; a directory with --shards); a missing directory is made"},
			&cli.Uint64Flag{Name: "seed", Usage: "seed of the random choices (same input and seed, same output bytes)"},
			&cli.StringFlag{Name: "on-invalid-reward", Value: "error", Usage: "null/NaN/Inf rewards: error | drop"},
			&cli.StringFlag{Name: "codec", Value: "zstd", Usage: "Parquet codec: zstd | snappy | gzip | none"},
			&cli.BoolFlag{Name: "since-last", Usage: "read only the rows of the --in experience table ingested since this job's last successful run (its watermark: _since_last/LABEL.json beside --out); an explore step with rows the last run read is left out, with a warning"},
			&cli.BoolFlag{Name: "allow-inside-input", Usage: "write outputs inside the input store's directory or matching its glob (refused by default: the next read would take them for part of the store)"},
			int64Flag(&cli.Int64Flag{Name: "step", Usage: "the trainer step about to run: with sample_strategy staleness_control, rows with model_version < step - max_staleness are not read", DefaultText: "every row read"}, schema.AtLeast1),
			progressFlag(),
		}, append(append(monitorFlags(), algorithmFlags()...), shardFlags(false)...)...),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return schema.Usagef("run takes no positional arguments (got %q)", c.Args().First())
			}
			o, err := runOptions(c)
			if err != nil {
				return err
			}
			bar := newProgress(c, "run", -1)
			o.Progress, o.Total = bar.Add, bar.Total
			res, err := builder.Run(c.Context, o, func(err error) int { return exitStatus(c.Context, err) })
			bar.Done()
			if err != nil {
				return err
			}
			if res.Since != nil && !res.Since.New {
				fmt.Fprintf(c.App.ErrWriter, "run: 0 new: nothing ingested into %s since snapshot %d; nothing written\n", res.Since.Dir, res.Since.From)
				return nil
			}
			printWarnings(c, "run", res.Warnings)
			if o.Rejected != "" {
				fmt.Fprintf(c.App.ErrWriter, "run: %d rejected rows written to %s\n", res.Rejected, schema.Redact(o.Rejected))
			}
			fmt.Fprintf(c.App.ErrWriter, "run: %s: %d experiences in %d groups -> %d written (%d filtered, %d invalid dropped, %d duplicated) to %s in %.1fs (%.0f/s)\n",
				res.Name, res.In, res.Groups, res.Out, res.Filtered, res.InvalidDropped, res.Duplicated, schema.Redact(res.Store),
				res.Elapsed.Seconds(), float64(res.In)/res.Elapsed.Seconds())
			if res.Since != nil {
				fmt.Fprintf(c.App.ErrWriter, "run: read the rows of %s ingested after snapshot %d, up to %d\n", res.Since.Dir, res.Since.From, res.Since.To)
			}
			if res.Out == 0 && res.In > 0 {
				fmt.Fprintln(c.App.ErrWriter, "run: warning: every experience was filtered out; the output store is empty")
			}
			return nil
		},
	}
}
