package main

import (
	"github.com/urfave/cli/v2"

	"github.com/rftpipe/rftpipe/pipeline/build"
)

// Algorithm jobs: `run` and `loss` take a Trinity-RFT algorithm (a type
// name, a YAML job file, or both: flags override the file).

// algorithmFlags are the flags selecting an algorithm job.
func algorithmFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "config", Usage: "YAML job `FILE`: Trinity-RFT's algorithm section plus input, output, metrics, prom, seed, columns, quirks (flags override it)"},
		&cli.StringFlag{Name: "algorithm", Usage: "algorithm type `NAME` (rftpipe algorithms lists them), with its default config"},
		&cli.BoolFlag{Name: "verbose", Usage: "list the job file's keys rftpipe accepts and ignores (Trinity's service sections) and the interpolations among them that do not resolve"},
	}
}

// jobOptions maps the flags of `run` or `loss` (command) to the job
// builder's options.
func jobOptions(c *cli.Context, command string) (*build.Options, error) {
	o := &build.Options{
		Command: command, AdvantageFn: c.String("advantage-fn"), AddStrategy: c.String("add-strategy"), Fn: c.String("fn"),
		Args: keyValues(c, "arg"), Operators: c.StringSlice("operator"), SkipOperators: c.StringSlice("skip-operator"), Rejected: c.String("rejected"), Config: c.String("config"), Algorithm: c.String("algorithm"),
		In: c.String("in"), Out: c.String("out"), GradOut: c.String("grad-out"), Metrics: c.String("metrics"), Prom: c.String("prom"),
		Label: c.String("job-label"), Seed: c.Uint64("seed"), HasSeed: c.IsSet("seed"),
		OnInvalidReward: setString(c, "on-invalid-reward"), Codec: c.String("codec"), InsideInput: c.Bool("allow-inside-input"),
		LossAggMode: c.String("loss-agg-mode"), KLLossFn: c.String("kl-loss-fn"), KLCoef: c.Float64("kl-coef"),
		EntropyLossFn: c.String("entropy-loss-fn"), EntropyCoef: c.Float64("entropy-coef"),
		Cols: c.StringSlice("col"), Step: c.Int64("step"), Device: c.String("device"),
		Verbose: c.Bool("verbose"), Log: c.App.ErrWriter, Replace: c.Bool("replace"),
	}
	if command == build.Loss && o.IsFile() {
		for _, f := range []string{"fn", "arg", "loss-agg-mode", "kl-loss-fn", "kl-coef", "entropy-loss-fn", "entropy-coef"} {
			if c.IsSet(f) {
				return nil, usagef("--%s does not mix with --config/--algorithm (set it in the job file's algorithm section)", f)
			}
		}
	}
	var err error
	o.Sharded, o.Shards, o.ShardIndex, err = shardOf(c)
	if err == nil && o.Replace && !o.Sharded {
		err = usagef("--replace needs --shards N (a single output store is always replaced whole)")
	}
	return o, err
}

// setString is a string flag's value when the command line sets it, else
// "" (a job file's value, or the default, applies).
func setString(c *cli.Context, name string) string {
	if !c.IsSet(name) {
		return ""
	}
	return c.String(name)
}
