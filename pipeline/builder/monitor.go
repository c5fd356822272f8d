package builder

import (
	"context"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rftpipe/rftpipe/pipeline"
	"github.com/rftpipe/rftpipe/pipeline/shard"
	"github.com/rftpipe/rftpipe/schema/fspath"
	"github.com/rftpipe/rftpipe/schema/store"
)

// Outcome is how a job ended, for its monitoring files: a nightly job's
// files exist after every run, failed or not, with the status gauges.
type Outcome struct {
	// Label names the job (job file name, algorithm or fn, or --job-label):
	// the only label, so every night's run adds to the same series.
	Label string
	// Metrics are the job's metrics (none when it failed early).
	Metrics map[string]float64
	// ExitCode is the process's exit status (0: success).
	ExitCode int
	// Start and Duration time the job.
	Start    time.Time
	Duration time.Duration
}

// Status returns the metrics with the status gauges: rftpipe/success (1 or
// 0), rftpipe/exit_code, rftpipe/duration_seconds and
// rftpipe/last_run_timestamp_seconds.
func (o Outcome) Status() map[string]float64 {
	m := make(map[string]float64, len(o.Metrics)+4)
	for k, v := range o.Metrics {
		m[k] = v
	}
	m["rftpipe/success"] = 0
	if o.ExitCode == 0 {
		m["rftpipe/success"] = 1
	}
	m["rftpipe/exit_code"] = float64(o.ExitCode)
	m["rftpipe/duration_seconds"] = o.Duration.Seconds()
	m["rftpipe/last_run_timestamp_seconds"] = float64(o.Start.Unix())
	return m
}

// WriteProm writes the outcome in the Prometheus text exposition format, as
// the node_exporter textfile collector reads it: one gauge per metric (and
// status gauge), named rftpipe_<metric> with every character outside
// [a-zA-Z0-9_:] replaced by '_' (rftpipe/success → rftpipe_success), with
// the one label job. The file is written atomically, so the collector never
// reads half a file.
func WriteProm(ctx context.Context, path string, o Outcome) error {
	labels := fmt.Sprintf(`{job=%s}`, promQuote(o.Label))
	metrics := o.Status()
	keys := make([]string, 0, len(metrics))
	for k := range metrics {
		keys = append(keys, k)
	}
	sort.Strings(keys) // collisions resolve the same way every run
	samples := map[string]float64{}
	for _, k := range keys {
		v := metrics[k]
		name := promName(k)
		for i := 2; ; i++ { // distinct metrics that sanitise alike keep distinct names
			if _, dup := samples[name]; !dup {
				break
			}
			name = promName(k) + "_" + strconv.Itoa(i)
		}
		samples[name] = v
	}
	names := make([]string, 0, len(samples))
	for n := range samples {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "# TYPE %s gauge\n%s%s %s\n", n, n, labels, promValue(samples[n]))
	}
	return store.WriteFile(ctx, path, func(w io.Writer) error {
		_, err := io.WriteString(w, b.String())
		return err
	})
}

// WriteMetricsFile writes the outcome's metrics and status gauges as JSON
// (pipeline.WriteMetrics), atomically.
func WriteMetricsFile(ctx context.Context, path string, o Outcome) error {
	return store.WriteFile(ctx, path, func(w io.Writer) error { return pipeline.WriteMetrics(w, o.Status()) })
}

// promName maps a metric name to a valid Prometheus name.
func promName(metric string) string {
	var b strings.Builder
	b.WriteString("rftpipe_")
	metric = strings.TrimPrefix(metric, "rftpipe/") // the status gauges
	for _, r := range metric {
		if r == '_' || r == ':' || r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// promQuote quotes a label value: backslash, double quote and newline escaped.
func promQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}

// promValue formats a sample value (NaN, +Inf and -Inf as Prometheus spells them).
func promValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// write writes the outcome to the metrics (JSON) and Prometheus files
// (either may be empty); the first error is returned.
func (o Outcome) write(ctx context.Context, metrics, prom string) error {
	var err error
	for _, w := range []struct {
		path  string
		write func(context.Context, string, Outcome) error
	}{{metrics, WriteMetricsFile}, {prom, WriteProm}} {
		if w.path == "" {
			continue
		}
		if werr := w.write(ctx, w.path, o); err == nil {
			err = werr
		}
	}
	return err
}

// Merged is the outcome of merging a sharded job's parts.
type Merged struct {
	*shard.Merged
	// Label is the label the monitoring files were written with.
	Label string
}

// MergeMetrics combines the metrics of the parts of the sharded job in
// directory dir (shard.MergeDir) and writes them to the metrics and
// Prometheus files, checked first as every output is (store.CheckOutputs):
// not onto a part's metrics or the plan, nor onto each other. Without a
// metrics file the merged metrics are written as JSON to stdout.
// label overrides the parts' label; the files report exit status 0, or
// missingCode when parts are missing.
func MergeMetrics(ctx context.Context, dir, metrics, prom, label string, missingCode int, stdout io.Writer) (*Merged, error) {
	outs := []store.Output{{Flag: "--metrics", Path: metrics}, {Flag: "--prom", Path: prom}}
	if err := store.CheckOutputs(ctx, []string{fspath.Join(shard.MetricsDir(dir), "part-*.json"), shard.PlanPath(dir)}, outs, false); err != nil {
		return nil, err
	}
	m, err := shard.MergeDir(dir)
	if err != nil {
		return nil, err
	}
	if label == "" {
		label = m.Label
	}
	code := 0
	if len(m.Missing) > 0 {
		code = missingCode
	}
	o := Outcome{Label: label, Metrics: m.Metrics, ExitCode: code, Start: time.Now().Add(-m.Duration), Duration: m.Duration}
	if prom != "" {
		if err := WriteProm(ctx, prom, o); err != nil {
			return nil, err
		}
	}
	if metrics == "" {
		err = pipeline.WriteMetrics(stdout, m.Metrics)
	} else {
		err = WriteMetricsFile(ctx, metrics, o)
	}
	if err != nil {
		return nil, err
	}
	return &Merged{Merged: m, Label: label}, nil
}
