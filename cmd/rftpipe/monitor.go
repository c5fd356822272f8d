package main

import "github.com/urfave/cli/v2"

// monitorFlags are the flags of a job a scheduler runs and monitors.
func monitorFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "metrics", Usage: "write the metrics and status gauges as JSON to `FILE` (also when the job fails)"},
		&cli.StringFlag{Name: "prom", Usage: "write the metrics and status gauges in the Prometheus text format to `FILE` (node_exporter textfile collector; also when the job fails)"},
		&cli.StringFlag{Name: "job-label", Usage: "the job label of the Prometheus samples (default: the job file's name, else the algorithm or fn)"},
	}
}
