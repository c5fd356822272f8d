package agg

import "math"

// Gatherer is the columnar form of Gather for stages that produce one metric
// map per group on a hot path (e.g. 125,000 groups per batch): instead of one
// Metrics map per group, the caller declares the metric names once and adds
// each group's value column by column. Metrics(prefix) returns exactly what
// Gather returns for the equivalent list of maps (a value not added for a
// group, or a NaN, is missing; a column with no value is dropped).
type Gatherer struct {
	names []string
	acc   []gatherAcc
}

type gatherAcc struct {
	sum, max, min float64
	n             int
}

// NewGatherer returns a Gatherer with one column per name; column i is names[i].
func NewGatherer(names ...string) *Gatherer {
	g := &Gatherer{names: names, acc: make([]gatherAcc, len(names))}
	for i := range g.acc {
		g.acc[i] = gatherAcc{max: math.Inf(-1), min: math.Inf(1)}
	}
	return g
}

// Add records one group's value v of column col. NaN counts as missing.
func (g *Gatherer) Add(col int, v float64) {
	if math.IsNaN(v) {
		return
	}
	a := &g.acc[col]
	a.sum += v
	a.n++
	a.max = math.Max(a.max, v)
	a.min = math.Min(a.min, v)
}

// Weights returns, for every "{prefix}/{name}/mean" of Metrics, the number
// of values it averages.
func (g *Gatherer) Weights(prefix string) Metrics {
	out := Metrics{}
	for i, a := range g.acc {
		if a.n > 0 {
			out[prefix+"/"+g.names[i]+"/mean"] = float64(a.n)
		}
	}
	return out
}

// Metrics returns "{prefix}/{name}/{mean,max,min}" for every column that
// received at least one value.
func (g *Gatherer) Metrics(prefix string) Metrics {
	out := Metrics{}
	for i, a := range g.acc {
		if a.n == 0 {
			continue
		}
		k := prefix + "/" + g.names[i]
		out[k+"/mean"] = a.sum / float64(a.n)
		out[k+"/max"] = a.max
		out[k+"/min"] = a.min
	}
	return out
}
