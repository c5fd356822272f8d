package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/rftpipe/rftpipe/pipeline/algorithm"
	"github.com/rftpipe/rftpipe/pipeline/job"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/objective"
)

// Algorithm jobs: `run` and `loss` take a Trinity-RFT algorithm (a type
// name, a YAML job file, or both: flags override the file).

// algorithmFlags are the flags selecting an algorithm job.
func algorithmFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "config", Usage: "YAML job `FILE`: Trinity-RFT's algorithm section plus input, output, metrics, prom, seed, columns, quirks (flags override it)"},
		&cli.StringFlag{Name: "algorithm", Usage: "algorithm type `NAME` (rftpipe algorithms lists them), with its default config"},
		&cli.BoolFlag{Name: "verbose", Usage: "list the job file's keys rftpipe accepts and ignores (Trinity's service sections)"},
	}
}

// isAlgorithmJob reports whether the command line selects an algorithm job.
func isAlgorithmJob(c *cli.Context) bool { return c.IsSet("config") || c.IsSet("algorithm") }

// loadJob reads --config (if any) and applies the command-line overrides
// among --algorithm, --in, --out, --metrics, --prom and --seed.
func loadJob(c *cli.Context) (*job.Job, error) {
	j := &job.Job{File: "command line"}
	if path := c.String("config"); path != "" {
		var err error
		if j, err = job.Load(path); err != nil {
			return nil, err
		}
	}
	if c.IsSet("algorithm") {
		j.SetAlgorithmType(c.String("algorithm"))
	}
	for flag, dst := range map[string]*string{"in": &j.Input, "out": &j.Output, "metrics": &j.Metrics, "prom": &j.Prom} {
		if c.IsSet(flag) {
			*dst = c.String(flag)
		}
	}
	if c.IsSet("seed") {
		j.Seed, j.HasSeed = c.Uint64("seed"), true
	}
	return j, nil
}

// resolveJob resolves the job's algorithm and prints the warnings.
func resolveJob(c *cli.Context, j *job.Job) (*algorithm.Resolved, error) {
	res, err := j.Resolve()
	if err != nil {
		return nil, err
	}
	for _, w := range res.Warnings {
		fmt.Fprintln(c.App.ErrWriter, "warning: "+w)
	}
	if c.Bool("verbose") { // keys accepted for compatibility and ignored
		for _, w := range j.Warnings {
			fmt.Fprintln(c.App.ErrWriter, "note: "+w)
		}
	}
	return res, nil
}

// runAlgorithmJob is `rftpipe run --config FILE` / `--algorithm NAME`;
// --arg overrides the advantage fn's arguments of the file.
func runAlgorithmJob(c *cli.Context) error {
	if c.IsSet("advantage-fn") || c.IsSet("add-strategy") {
		return usagef("--advantage-fn and --add-strategy do not mix with --config/--algorithm (set advantage_fn in the job file)")
	}
	j, err := loadJob(c)
	if err != nil {
		return err
	}
	label := jobLabel(j.File, j.Algorithm.AlgorithmType)
	return monitored(c, label, j.Metrics, j.Prom, func() (agg.Metrics, error) {
		res, err := resolveJob(c, j)
		if err != nil {
			return nil, err
		}
		sh, err := shardOf(c)
		if err != nil {
			return nil, err
		}
		dir := j.Output
		if sh != nil {
			if j.Output, err = partOut(dir, *sh); err != nil {
				return nil, err
			}
		}
		bar := newProgress(c, "run", -1)
		out, err := job.Run(c.Context, j, res, job.RunOptions{
			OnInvalidReward: c.String("on-invalid-reward"),
			Parquet:         store.ParquetOptions{Codec: c.String("codec")},
			Progress:        bar.Add,
			Total:           bar.Total,
			InsideInput:     c.Bool("allow-inside-input"),
			Args:            c.StringSlice("arg"),
			Shard:           sh,
		})
		bar.Done()
		if err != nil {
			return nil, err
		}
		if sh != nil {
			if err := writePart(dir, *sh, label, out); err != nil {
				return nil, err
			}
		}
		fmt.Fprintf(c.App.ErrWriter, "run: algorithm %s (%s): %d experiences -> %d written to %s in %.1fs\n",
			res.Config.AlgorithmType, job.What(res), out.In, out.Out, j.Output, out.Elapsed.Seconds())
		printWarnings(c, "run", out.Warnings)
		return out.Metrics, nil
	})
}

// algorithmObjective is the objective of `rftpipe loss --algorithm NAME` /
// `--config FILE`: the trainer's, from the resolved algorithm section.
func algorithmObjective(c *cli.Context) (*objective.Objective, error) {
	for _, f := range []string{"fn", "arg", "loss-agg-mode", "kl-loss-fn", "kl-coef", "entropy-loss-fn", "entropy-coef"} {
		if c.IsSet(f) {
			return nil, usagef("--%s does not mix with --config/--algorithm (set it in the job file's algorithm section)", f)
		}
	}
	j, err := loadJob(c)
	if err != nil {
		return nil, err
	}
	res, err := resolveJob(c, j)
	if err != nil {
		return nil, err
	}
	if in, err := j.InputStore(); err != nil {
		return nil, err
	} else if !c.IsSet("in") && in != "" {
		if err := c.Set("in", in); err != nil {
			return nil, err
		}
	}
	return res.Objective()
}
