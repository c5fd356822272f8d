package main

import (
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rftpipe/rftpipe/pipeline/job"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/stages/agg"
)

// monitorFlags are the flags of a job a scheduler runs and monitors.
func monitorFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "metrics", Usage: "write the metrics and status gauges as JSON to `FILE` (also when the job fails)"},
		&cli.StringFlag{Name: "prom", Usage: "write the metrics and status gauges in the Prometheus text format to `FILE` (node_exporter textfile collector; also when the job fails)"},
		&cli.StringFlag{Name: "job-label", Usage: "the job label of the Prometheus samples (default: the job file's name, else the algorithm or fn)"},
	}
}

// monitored runs work as a monitored job: the metrics and Prometheus files
// (either path may be empty) are checked writable before the work starts
// and written after it, failed or not, with the status gauges
// (rftpipe/success, exit_code, duration_seconds, last_run_timestamp_seconds).
func monitored(c *cli.Context, label, metricsPath, promPath string, work func() (agg.Metrics, error)) error {
	for _, p := range []string{metricsPath, promPath} {
		if p != "" {
			if err := store.CheckWritable(p); err != nil {
				return err
			}
		}
	}
	if l := c.String("job-label"); l != "" {
		label = l
	}
	start := time.Now()
	m, err := work()
	o := job.Outcome{Label: label, Metrics: m, ExitCode: exitStatus(c.Context, err), Start: start, Duration: time.Since(start)}
	for _, w := range []struct {
		path  string
		write func(string, job.Outcome) error
	}{{metricsPath, job.WriteMetricsFile}, {promPath, job.WriteProm}} {
		if w.path == "" {
			continue
		}
		if werr := w.write(w.path, o); err == nil {
			err = werr
		}
	}
	return err
}

// jobLabel names a job by its file (without extension), else by name.
func jobLabel(file, name string) string {
	if file != "" && file != "command line" {
		return strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	}
	return name
}
