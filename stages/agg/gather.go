package agg

import (
	"math"
	"sort"
)

// Metrics is a metric map, name → value, under upstream's exact names.
type Metrics map[string]float64

// Names returns the metric names sorted, for deterministic output.
func (m Metrics) Names() []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Merge copies src into m under prefix + "/" + name (prefix "" keeps names).
func (m Metrics) Merge(prefix string, src Metrics) {
	for k, v := range src {
		if prefix != "" {
			k = prefix + "/" + k
		}
		m[k] = v
	}
}

// Gather turns per-group metric maps into batch metrics
// "{prefix}/{name}/{mean,max,min}" over the groups that report the name (each
// group weighs 1; NaN values count as missing, as pandas skips them). An
// empty list, or one without any metric, gives an empty map.
func Gather(groups []Metrics, prefix string) Metrics {
	type acc struct {
		sum, max, min float64
		n             int
	}
	stats := map[string]*acc{}
	for _, g := range groups {
		for k, v := range g {
			a := stats[k]
			if a == nil {
				a = &acc{max: math.Inf(-1), min: math.Inf(1)}
				stats[k] = a
			}
			if math.IsNaN(v) {
				continue
			}
			a.sum += v
			a.n++
			a.max = math.Max(a.max, v)
			a.min = math.Min(a.min, v)
		}
	}
	out := Metrics{}
	for k, a := range stats {
		if a.n == 0 {
			continue // all missing: pandas drops the column
		}
		out[prefix+"/"+k+"/mean"] = a.sum / float64(a.n)
		out[prefix+"/"+k+"/max"] = a.max
		out[prefix+"/"+k+"/min"] = a.min
	}
	return out
}

// Summarize adds "{prefix}/{name}/{mean,max,min}" of v to m with numpy's
// semantics, as the 0.6 line's aggregate_metrics: a NaN value makes all
// three NaN (0.5.2's Gather skips it, Q-55); an empty v adds nothing.
func (m Metrics) Summarize(prefix, name string, v []float64) {
	if len(v) == 0 {
		return
	}
	sum, hi, lo := 0.0, math.Inf(-1), math.Inf(1)
	for _, x := range v {
		if math.IsNaN(x) {
			sum, hi, lo = math.NaN(), math.NaN(), math.NaN()
			break
		}
		sum += x
		hi, lo = math.Max(hi, x), math.Min(lo, x)
	}
	k := prefix + "/" + name
	m[k+"/mean"] = sum / float64(len(v))
	m[k+"/max"] = hi
	m[k+"/min"] = lo
}
