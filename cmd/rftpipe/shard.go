package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/rftpipe/rftpipe/pipeline/builder"
	"github.com/rftpipe/rftpipe/schema"
)

// Sharded jobs: `run --shards N [--shard I]` processes the batches of shard
// I into OUT/part-I.parquet and OUT/_metrics/part-I.json; `merge-metrics
// OUT` combines the parts' metrics.

// indexEnv is the variable a Kubernetes Indexed Job sets to each pod's index.
const indexEnv = "JOB_COMPLETION_INDEX"

// shardFlags select one shard of a job; hidden, they are still parsed, so
// the command can say why it refuses them (loss: a cross-batch stage).
func shardFlags(hidden bool) []cli.Flag {
	return []cli.Flag{
		intFlag(&cli.IntFlag{Name: "shards", Hidden: hidden, Usage: "split the job by explore batch into `N` shards; --out is then a directory of parts (OUT/part-I.parquet, OUT/_metrics/part-I.json) and of their plan (OUT/_plan.json: N, the input, the job), and a directory of another plan is refused", DefaultText: "one job, unsharded"}, builder.ShardsRange),
		intFlag(&cli.IntFlag{Name: "shard", Hidden: hidden, Usage: "the shard `I` to run (0 .. N-1)", DefaultText: "$" + indexEnv + ", as a Kubernetes Indexed Job sets it"}, builder.ShardRange),
		&cli.BoolFlag{Name: "replace", Hidden: hidden, Usage: "with --shards: replace an output directory of another plan whole (its parts are deleted) instead of refusing it"},
	}
}

// shardOf returns the shard the command line selects: sharded is false
// when it is not sharded.
func shardOf(c *cli.Context) (sharded bool, n, i int, err error) {
	if !c.IsSet("shards") {
		if c.IsSet("shard") {
			return false, 0, 0, schema.Usagef("--shard needs --shards N")
		}
		return false, 0, 0, nil
	}
	i = c.Int("shard")
	if !c.IsSet("shard") {
		v, ok := os.LookupEnv(indexEnv)
		if !ok {
			return false, 0, 0, schema.Usagef("--shards needs --shard I or $%s", indexEnv)
		}
		if i, err = strconv.Atoi(strings.TrimSpace(v)); err != nil {
			return false, 0, 0, schema.Usagef("$%s=%q is not a shard index", indexEnv, v)
		}
	}
	return true, c.Int("shards"), i, nil
}

func mergeMetricsCommand() *cli.Command {
	return &cli.Command{
		Name:      "merge-metrics",
		Usage:     "combine the metrics of the parts of a sharded job (OUT/_metrics/part-*.json) as one run would report them",
		ArgsUsage: "OUT",
		Description: "Counts add, means weigh by the groups (or rows) they average, min and max combine; timings\n" +
			"are the slowest part's. Lists the parts that are missing (exit 1 when any is).",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "metrics", Usage: "write the merged metrics as JSON to `FILE` (default: standard output)"},
			&cli.StringFlag{Name: "prom", Usage: "write the merged metrics in the Prometheus text format to `FILE`"},
			&cli.StringFlag{Name: "job-label", Usage: "the job label of the Prometheus samples (default: the parts')"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return schema.Usagef("merge-metrics takes one output directory")
			}
			m, err := builder.MergeMetrics(c.Context, c.Args().First(), c.String("metrics"), c.String("prom"), c.String("job-label"), exitFailure, c.App.Writer)
			if err != nil {
				return err
			}
			code := 0
			if len(m.Missing) > 0 {
				code = exitFailure
				fmt.Fprintf(c.App.ErrWriter, "merge-metrics: %d of %d parts missing: %s\n", len(m.Missing), m.Shards, joinInts(m.Missing))
			} else {
				fmt.Fprintf(c.App.ErrWriter, "merge-metrics: all %d parts\n", m.Shards)
			}
			if code != 0 {
				return exitCode(code)
			}
			return nil
		},
	}
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}
