package main

import (
	"github.com/urfave/cli/v2"

	"github.com/rftpipe/rftpipe/pipeline/builder"
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

// commonOptions maps the flags every job command shares.
func commonOptions(c *cli.Context) (builder.Common, error) {
	o := builder.Common{
		Config: c.String("config"), Algorithm: c.String("algorithm"), In: c.String("in"),
		Metrics: c.String("metrics"), Prom: c.String("prom"), Label: c.String("job-label"),
		Seed: c.Uint64("seed"), HasSeed: c.IsSet("seed"), Step: c.Int64("step"),
		Replace: c.Bool("replace"), Verbose: c.Bool("verbose"), Log: c.App.ErrWriter,
	}
	var err error
	o.Sharded, o.Shards, o.ShardIndex, err = shardOf(c)
	return o, err
}

// runOptions maps the flags of `run`.
func runOptions(c *cli.Context) (*builder.RunOptions, error) {
	com, err := commonOptions(c)
	if err != nil {
		return nil, err
	}
	return &builder.RunOptions{
		Common: com, AdvantageFn: c.String("advantage-fn"), AddStrategy: c.String("add-strategy"),
		Args: keyValues(c, "arg"), Operators: c.StringSlice("operator"), SkipOperators: c.StringSlice("skip-operator"),
		Out: c.String("out"), Rejected: c.String("rejected"),
		OnInvalidReward: setString(c, "on-invalid-reward"), Codec: c.String("codec"), InsideInput: c.Bool("allow-inside-input"),
		SinceLast: c.Bool("since-last"),
	}, nil
}

// lossOptions maps the flags of `loss`.
func lossOptions(c *cli.Context) (*builder.LossOptions, error) {
	com, err := commonOptions(c)
	if err != nil {
		return nil, err
	}
	o := &builder.LossOptions{
		Common: com, Fn: c.String("fn"), Args: keyValues(c, "arg"),
		LossAggMode: c.String("loss-agg-mode"), KLLossFn: c.String("kl-loss-fn"), KLCoef: c.Float64("kl-coef"),
		EntropyLossFn: c.String("entropy-loss-fn"), EntropyCoef: c.Float64("entropy-coef"),
		Cols: c.StringSlice("col"), Device: c.String("device"), GradOut: c.String("grad-out"),
	}
	for _, f := range []string{"fn", "arg", "loss-agg-mode", "kl-loss-fn", "kl-coef", "entropy-loss-fn", "entropy-coef"} {
		if c.IsSet(f) {
			o.Given = append(o.Given, f)
		}
	}
	return o, nil
}

// setString is a string flag's value when the command line sets it, else
// "" (a job file's value, or the default, applies).
func setString(c *cli.Context, name string) string {
	if !c.IsSet(name) {
		return ""
	}
	return c.String(name)
}
