package shard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/fspath"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/stages/agg"
)

// Format is the format tag of a part's metrics file.
const Format = "rftpipe/part-metrics/v1"

// How the metric values of the parts combine into the whole job's.
const (
	Sum  = "sum"  // counts add
	Mean = "mean" // means weigh by their weight (the number of values each averages)
	Max  = "max"  // the largest; also the timings: the slowest part
	Min  = "min"  // the smallest
	Same = "same" // a setting every part reports alike (kl_coef)
)

// Metric is one metric of a part: its value (null for NaN or infinite, which
// JSON cannot hold), how it combines and, for a mean, its weight.
type Metric struct {
	Value  *float64 `json:"value"`
	Merge  string   `json:"merge"`
	Weight float64  `json:"weight,omitempty"`
}

// Part is the metrics file of one shard (OUT/_metrics/part-I.json).
type Part struct {
	Format string `json:"format"`
	// Shard and Shards: the part is shard Shard of Shards.
	Shard  int `json:"shard"`
	Shards int `json:"shards"`
	// Label names the job (the monitoring label).
	Label string `json:"label"`
	// Plan is the ID of the directory's plan the part ran under (Plan.ID).
	Plan string `json:"plan,omitempty"`
	// Rows is the number of input rows of the shard (its batches).
	Rows int64 `json:"rows"`
	// DurationSeconds is the wall time of the shard's job.
	DurationSeconds float64           `json:"duration_seconds"`
	Metrics         map[string]Metric `json:"metrics"`
}

// MergeOf says how the metric name combines over parts; weighted says
// whether the job reported a weight for it (the number of groups a mean
// over groups averages, the rows a mean over rows averages).
func MergeOf(name string, weighted bool) string {
	switch {
	case strings.HasPrefix(name, "time/") || strings.HasSuffix(name, "_time"):
		return Max
	case weighted:
		return Mean
	case strings.HasSuffix(name, "/max"):
		return Max
	case strings.HasSuffix(name, "/min"):
		return Min
	case strings.HasSuffix(name, "_count"):
		return Sum
	}
	return Same
}

// NewPart returns the metrics file of shard s, run under the plan of ID
// plan: every metric with how it combines (MergeOf) and its weight from
// weights.
func NewPart(s Shard, label, plan string, rows int64, elapsed time.Duration, metrics, weights agg.Metrics) *Part {
	p := &Part{Format: Format, Shard: s.I, Shards: s.N, Label: label, Plan: plan, Rows: rows,
		DurationSeconds: elapsed.Seconds(), Metrics: map[string]Metric{}}
	for name, v := range metrics {
		w, weighted := weights[name]
		m := Metric{Merge: MergeOf(name, weighted), Value: finite(v)}
		if m.Merge == Mean {
			m.Weight = w
		}
		p.Metrics[name] = m
	}
	return p
}

func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// Write writes the part into out's metrics directory, atomically.
func (p *Part) Write(ctx context.Context, out string) error {
	if err := store.MkdirAll(MetricsDir(out)); err != nil {
		return fmt.Errorf("metrics directory: %w", err)
	}
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	return store.WriteFile(ctx, MetricsPath(out, p.Shard), func(w io.Writer) error {
		_, err := w.Write(append(b, '\n'))
		return err
	})
}

// Merged is the metrics of a sharded job, combined from its parts.
type Merged struct {
	// Metrics are the job's metrics, as one run over the whole store reports
	// them (the timings: the slowest part's).
	Metrics agg.Metrics
	// Shards is the number of shards; Found the parts present, Missing the
	// ones absent.
	Shards         int
	Found, Missing []int
	// Label is the parts' job label; Duration the longest part's wall time.
	Label    string
	Duration time.Duration
}

var partName = regexp.MustCompile(`^part-(\d+)\.json$`)

// MergeDir combines the metrics files of directory out. Parts of different
// plans (jobs, inputs, shard counts: the directory's Plan), labels or shard
// counts, a shard count past MaxShards, or a metric that combines
// differently across parts, are an error; absent parts are listed in
// Missing.
func MergeDir(out string) (*Merged, error) {
	dir := MetricsDir(out)
	ents, err := store.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, schema.Errorf(dir, -1, "", "no metrics directory: no shard has finished")
		}
		return nil, err
	}
	plan, err := ReadPlan(out)
	if err != nil {
		return nil, err
	}
	var parts []*Part
	for _, name := range ents {
		m := partName.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		path := fspath.Join(dir, name)
		b, err := store.ReadFile(path)
		if err != nil {
			return nil, err
		}
		p := &Part{}
		if err := json.Unmarshal(b, p); err != nil || p.Format != Format {
			return nil, schema.Errorf(path, -1, "", "not a part metrics file (format %q)", Format)
		}
		if i, _ := strconv.Atoi(m[1]); i != p.Shard {
			return nil, schema.Errorf(path, -1, "", "holds the metrics of shard %d", p.Shard)
		}
		if plan != nil && p.Plan != plan.ID() {
			return nil, schema.Errorf(path, -1, "", "ran under another plan than the directory's %s (a part of another job, input or shard count): rerun shard %d into this directory", PlanPath(out), p.Shard)
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return nil, schema.Errorf(dir, -1, "", "holds no part metrics")
	}
	return Merge(parts)
}

// Merge combines parts (of one job) as one run over the whole store.
func Merge(parts []*Part) (*Merged, error) {
	sort.Slice(parts, func(a, b int) bool { return parts[a].Shard < parts[b].Shard })
	m := &Merged{Metrics: agg.Metrics{}, Shards: parts[0].Shards, Label: parts[0].Label}
	accs := map[string]*metricAcc{}
	seen := map[int]bool{}
	for _, p := range parts {
		if err := checkPart(p, parts[0]); err != nil {
			return nil, err
		}
		seen[p.Shard] = true
		m.Found = append(m.Found, p.Shard)
		m.Duration = max(m.Duration, time.Duration(p.DurationSeconds*float64(time.Second)))
		for name, x := range p.Metrics {
			a := accs[name]
			if a == nil {
				a = &metricAcc{merge: x.Merge, nullOnly: true, part: p.Shard}
				accs[name] = a
			}
			if err := a.add(name, x, p.Shard); err != nil {
				return nil, err
			}
		}
	}
	for name, a := range accs {
		m.Metrics[name] = a.value()
	}
	for i := 0; i < m.Shards; i++ {
		if !seen[i] {
			m.Missing = append(m.Missing, i)
		}
	}
	return m, nil
}

// checkPart refuses part p unless it is a valid shard of the job, plan and
// shard count of first.
func checkPart(p, first *Part) error {
	if p.Shards < 1 || p.Shards > MaxShards || p.Shard < 0 || p.Shard >= p.Shards {
		return schema.BadInputf("part %d claims to be shard %d of %d: want 0 <= shard < shards <= %d", p.Shard, p.Shard, p.Shards, MaxShards)
	}
	if p.Label != first.Label {
		return schema.BadInputf("part %d is of job %q, part %d of job %q: one output directory per job", first.Shard, first.Label, p.Shard, p.Label)
	}
	if p.Plan != first.Plan {
		return schema.BadInputf("part %d ran under plan %.12s, part %d under plan %.12s (another job, input or shard count): one output directory per plan",
			first.Shard, first.Plan, p.Shard, p.Plan)
	}
	if p.Shards != first.Shards {
		return schema.BadInputf("part %d is of a %d-shard job, part %d of a %d-shard job: one output directory per shard count",
			first.Shard, first.Shards, p.Shard, p.Shards)
	}
	return nil
}

// metricAcc combines one metric's values over the parts.
type metricAcc struct {
	merge    string  // how it combines (Sum, Mean, Max, Min, Same)
	v, w     float64 // the value so far (for Mean, the weighted sum) and weight
	part     int     // the first part that has it
	nullOnly bool    // no part has given a value yet
}

// add adds part's value x of metric name.
func (a *metricAcc) add(name string, x Metric, part int) error {
	if a.merge != x.Merge {
		return schema.BadInputf("metric %s combines as %s in part %d, as %s in part %d", name, a.merge, a.part, x.Merge, part)
	}
	if x.Value == nil || (a.merge == Mean && x.Weight == 0) {
		return nil // a mean over nothing (NaN): pandas skips it, so do we
	}
	v := *x.Value
	switch {
	case a.nullOnly:
		a.v = v
		if a.merge == Mean {
			a.v = v * x.Weight
		}
		a.w = x.Weight
	case a.merge == Sum:
		a.v += v
	case a.merge == Mean:
		a.v += v * x.Weight
		a.w += x.Weight
	case a.merge == Max:
		a.v = math.Max(a.v, v)
	case a.merge == Min:
		a.v = math.Min(a.v, v)
	case a.merge == Same && a.v != v:
		return schema.BadInputf("metric %s is %v in part %d and %v in part %d: the parts ran with different settings", name, a.v, a.part, v, part)
	}
	a.nullOnly = false
	return nil
}

// value is the combined value: NaN when no part gave one.
func (a *metricAcc) value() float64 {
	switch {
	case a.nullOnly:
		return math.NaN()
	case a.merge == Mean:
		return a.v / a.w
	default:
		return a.v
	}
}
