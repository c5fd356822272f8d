package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rftpipe/rftpipe/pipeline"
	"github.com/rftpipe/rftpipe/pipeline/job"
	"github.com/rftpipe/rftpipe/pipeline/shard"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/stages/args"
)

// Sharded jobs: `run --shards N [--shard I]` processes the batches of shard
// I into OUT/part-I.parquet and OUT/_metrics/part-I.json; `merge-metrics
// OUT` combines the parts' metrics.

// indexEnv is the variable a Kubernetes Indexed Job sets to each pod's index.
const indexEnv = "JOB_COMPLETION_INDEX"

// The valid ranges of --shards and --shard.
var (
	shardsRange = args.Range(fmt.Sprintf("[1,%d]", shard.MaxShards))
	shardRange  = args.Range(fmt.Sprintf("[0,%d]", shard.MaxShards-1))
)

// shardFlags select one shard of a job.
func shardFlags() []cli.Flag {
	return []cli.Flag{
		intFlag(&cli.IntFlag{Name: "shards", Usage: "split the job by explore batch into `N` shards; --out is then a directory of parts (OUT/part-I.parquet, OUT/_metrics/part-I.json)"}, shardsRange),
		intFlag(&cli.IntFlag{Name: "shard", Usage: "the shard `I` to run (0 .. N-1; default: $" + indexEnv + ", as a Kubernetes Indexed Job sets it)"}, shardRange),
	}
}

// shardOf returns the shard the command line selects, nil when it is not
// sharded.
func shardOf(c *cli.Context) (*shard.Shard, error) {
	if !c.IsSet("shards") {
		if c.IsSet("shard") {
			return nil, usagef("--shard needs --shards N")
		}
		return nil, nil
	}
	i := c.Int("shard")
	if !c.IsSet("shard") {
		v, ok := os.LookupEnv(indexEnv)
		if !ok {
			return nil, usagef("--shards needs --shard I or $%s", indexEnv)
		}
		var err error
		if i, err = strconv.Atoi(strings.TrimSpace(v)); err != nil {
			return nil, usagef("$%s=%q is not a shard index", indexEnv, v)
		}
	}
	s, err := shard.New(c.Int("shards"), i)
	if err != nil {
		return nil, usagef("%s", strings.TrimPrefix(err.Error(), "bad input: "))
	}
	return &s, nil
}

// partOut returns the output store of shard s in directory out, creating
// the directory.
func partOut(out string, s shard.Shard) (string, error) {
	if out == "" {
		return "", usagef("--shards needs --out DIR (the directory of the parts)")
	}
	if ext := filepath.Ext(out); ext != "" {
		if _, err := store.FormatOf(out); err == nil {
			return "", usagef("with --shards, --out is a directory of parts, not the store %s", out)
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", fmt.Errorf("output directory: %w", err)
	}
	return shard.PartPath(out, s.I), nil
}

// writePart writes the metrics file of shard s of a finished job.
func writePart(out string, s shard.Shard, label string, res *pipeline.Result) error {
	return shard.NewPart(s, label, res.In, res.Elapsed, res.Metrics, res.Weights).Write(out)
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
				return usagef("merge-metrics takes one output directory")
			}
			m, err := shard.MergeDir(c.Args().First())
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
			label := m.Label
			if l := c.String("job-label"); l != "" {
				label = l
			}
			o := job.Outcome{Label: label, Metrics: m.Metrics, ExitCode: code, Start: time.Now().Add(-m.Duration), Duration: m.Duration}
			if p := c.String("prom"); p != "" {
				if err := job.WriteProm(p, o); err != nil {
					return err
				}
			}
			if p := c.String("metrics"); p != "" {
				err = job.WriteMetricsFile(p, o)
			} else {
				err = pipeline.WriteMetrics(c.App.Writer, m.Metrics)
			}
			if err == nil && code != 0 {
				err = exitCode(code)
			}
			return err
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
