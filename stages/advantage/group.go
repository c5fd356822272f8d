package advantage

import (
	"fmt"
	"math"
	"strconv"

	"github.com/rftpipe/rftpipe/schema"
)

// Groups partitions input rows into groups, CSR style: group g holds the input
// row indices Rows[Off[g]:Off[g+1]]. Groups are numbered in first-appearance
// order; rows inside a group are in output order (input order unless a stage
// documents otherwise).
type Groups struct {
	Off  []int32 // len = number of groups + 1; Off[0] = 0
	Rows []int32
}

// Len returns the number of groups.
func (g Groups) Len() int {
	if len(g.Off) == 0 {
		return 0
	}
	return len(g.Off) - 1
}

// Group returns the input rows of group i.
func (g Groups) Group(i int) []int32 { return g.Rows[g.Off[i]:g.Off[i+1]] }

// IDOf returns, for every input row, the index of its group (n = number of rows).
func (g Groups) IDOf(n int) []int32 {
	id := make([]int32, n)
	for i := 0; i < g.Len(); i++ {
		for _, r := range g.Group(i) {
			id[r] = int32(i)
		}
	}
	return id
}

// TID renders the task key "batch/task" of an experience id; batch and task
// are the string renderings of the id parts (Python str()), so the integer 0
// and the string "0" give the same key.
func TID(batch, task string) string { return batch + "/" + task }

// RID renders the run key "batch/task/run".
func RID(batch, task string, run int64) string {
	return batch + "/" + task + "/" + strconv.FormatInt(run, 10)
}

// SID renders the step key "batch/task/step".
func SID(batch, task string, step int64) string {
	return batch + "/" + task + "/" + strconv.FormatInt(step, 10)
}

// GroupBy groups rows by exact key equality: groups in first-appearance
// order, rows in input order.
func GroupBy(keys []string) Groups {
	ids := make([]int32, len(keys))
	index := make(map[string]int32, len(keys)/4+1)
	for i, k := range keys {
		id, ok := index[k]
		if !ok {
			id = int32(len(index))
			index[k] = id
		}
		ids[i] = id
	}
	g, _ := GroupByIDs(ids, len(index))
	return g
}

// GroupByIDs builds Groups from a dense group id per row (0..n-1, numbered in
// first-appearance order, as DuckDB's dense_rank() over min(row_idx) gives);
// rows stay in input order. It fails if an id is out of range or the ids are
// not numbered in first-appearance order.
func GroupByIDs(ids []int32, n int) (Groups, error) {
	off := make([]int32, n+2)
	next := int32(0)
	for i, id := range ids {
		switch {
		case id < 0 || int(id) >= n:
			return Groups{}, schema.BadInputf("row %d: group id %d out of range [0, %d)", i, id, n)
		case id > next:
			return Groups{}, schema.BadInputf("row %d: group id %d appears before group %d", i, id, next)
		case id == next:
			next++
		}
		off[id+2]++
	}
	if int(next) != n {
		return Groups{}, schema.BadInputf("%d group ids declared, %d used", n, next)
	}
	for g := 2; g < len(off); g++ {
		off[g] += off[g-1]
	}
	rows := make([]int32, len(ids))
	for i, id := range ids {
		rows[off[id+1]] = int32(i)
		off[id+1]++
	}
	return Groups{Off: off[:n+1], Rows: rows}, nil
}

// check verifies that g partitions rows 0..n-1.
func (g Groups) check(what string, n int) error {
	if g.Len() == 0 {
		if n > 0 {
			return schema.BadInputf("%s grouping is missing", what)
		}
		return nil
	}
	if int(g.Off[len(g.Off)-1]) != n || len(g.Rows) != n {
		return schema.BadInputf("%s grouping covers %d rows, the batch has %d", what, len(g.Rows), n)
	}
	return nil
}

// SingletonPolicy is what a group-relative fn does with a one-experience
// group (quirks ).
type SingletonPolicy int

// Singleton policies, in the order of their arg values.
const (
	// SingletonUpstream does what upstream does: mean 0 / std 1 (or baseline
	// 0), so the advantage is the raw reward; REC fails, as upstream does.
	SingletonUpstream SingletonPolicy = iota
	// SingletonUnit uses mean 0 / std 1 (baseline 0) for every fn, REC
	// included (the recommended Q-03 behaviour).
	SingletonUnit
	// SingletonZero gives the row a zero advantage.
	SingletonZero
	// SingletonDrop removes the row.
	SingletonDrop
)

var singletonNames = []string{"upstream", "unit", "zero", "drop"}

// String returns the arg value of the policy.
func (p SingletonPolicy) String() string { return singletonNames[p] }

// precision says which parts of a group rule run in float32, as upstream.
type precision int

const (
	// prec32: statistics and score in float32 (pipeline-side fns).
	prec32 precision = iota
	// prec32Stats: statistics on a float32 tensor, score arithmetic in the
	// score dtype (float64 here): grpo_verl, rloo, opmd_verl, clipb, clipv.
	prec32Stats
	// prec64: everything in float64 (asymre_verl).
	prec64
)

// round rounds a statistic to the precision's statistics dtype.
func (p precision) round(x float64) float64 {
	if p == prec64 {
		return x
	}
	return float64(float32(x))
}

// sub returns a − b in the precision's score dtype.
func (p precision) sub(a, b float64) float64 {
	if p == prec32 {
		return float64(float32(a) - float32(b))
	}
	return a - b
}

// norm returns (a − mean) / (std + eps) in the precision's score dtype.
func (p precision) norm(a, mean, std, eps float64) float64 {
	if p == prec32 {
		return float64((float32(a) - float32(mean)) / (float32(std) + float32(eps)))
	}
	return (a - mean) / (std + eps)
}

// meanStd returns the mean and unbiased std of v (std NaN for fewer than two
// values). Values are first rounded to the precision's statistics dtype; the
// sums run in float64 and the results are rounded back, so identical values
// give a std of exactly 0.
func (p precision) meanStd(v []float64) (mean, std float64) {
	mean = p.mean(v)
	n := len(v)
	if n < 2 {
		return p.round(mean), math.NaN()
	}
	ss := 0.0
	for _, x := range v {
		d := p.round(x) - mean
		ss += d * d
	}
	return p.round(mean), p.round(math.Sqrt(ss / float64(n-1)))
}

// mean returns the unrounded float64 mean of v's values in the statistics dtype.
func (p precision) mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += p.round(x)
	}
	return s / float64(len(v))
}

// group is one group as a groupRule sees it.
type group struct {
	idx   int       // group index
	rows  []int32   // input rows
	v     []float64 // the values of those rows (reward, or Σ token rewards)
	score []float64 // out: per-row score
	met   []float64 // out: the group's metrics (NaN = not reported)
	fixed bool      // a one-row group under a policy other than upstream
}

// groupRule is what distinguishes the group-relative fns: it turns one
// group's values into per-row scores and metrics, and says whether the group
// is kept. Every group-relative fn, pipeline or trainer side, runs through
// runGroups with its own rule.
type groupRule interface {
	// metricNames lists the per-group metrics, in upstream order.
	metricNames() []string
	// apply scores one group.
	apply(g *group) (keep bool, err error)
}

// groupOut receives the results of runGroups.
type groupOut[F float32 | float64] struct {
	score    []F           // per input row (nil: not recorded)
	keep     []bool        // per input row (nil: not recorded)
	reason   []uint8       // per input row: why dropped (nil: not recorded)
	gather   groupGatherer // per-group metrics (nil: not recorded)
	filtered int           // rows of dropped groups
	dropped  int           // number of dropped groups
}

// groupGatherer receives one metric value of one group.
type groupGatherer interface{ Add(col int, v float64) }

// runGroups applies rule to every group of gs over vals (indexed by input
// row), writing per-row scores, keep flags and per-group metrics into out.
func runGroups[F float32 | float64](gs Groups, vals []float64, rule groupRule, pol SingletonPolicy, out *groupOut[F]) error {
	names := rule.metricNames()
	g := &group{met: make([]float64, len(names))}
	var vbuf, sbuf []float64
	for i := 0; i < gs.Len(); i++ {
		rows := gs.Group(i)
		n := len(rows)
		if cap(vbuf) < n {
			vbuf, sbuf = make([]float64, n), make([]float64, n)
		}
		g.idx, g.rows, g.v, g.score = i, rows, vbuf[:n], sbuf[:n]
		for j, r := range rows {
			g.v[j] = vals[r]
		}
		for j := range g.met {
			g.met[j] = math.NaN()
		}
		g.fixed = n == 1 && pol != SingletonUpstream
		keep, err := rule.apply(g)
		if err != nil {
			return err
		}
		if n == 1 {
			switch pol {
			case SingletonZero:
				g.score[0] = 0
			case SingletonDrop:
				keep = false
			}
		}
		if out.gather != nil {
			for j, m := range g.met {
				out.gather.Add(j, m)
			}
		}
		if !keep {
			out.filtered += n
			out.dropped++
			if out.reason != nil {
				why := reasonStdBelow
				if n == 1 {
					why = reasonSingleton
				}
				for _, r := range rows {
					out.reason[r] = why
				}
			}
			continue
		}
		for j, r := range rows {
			if out.score != nil {
				out.score[r] = F(g.score[j])
			}
			if out.keep != nil {
				out.keep[r] = true
			}
		}
	}
	return nil
}

// errorf returns a bad-input error prefixed with the fn name.
func errorf(fn, format string, args ...any) error {
	return schema.BadInputf("advantage fn %s: %s", fn, fmt.Sprintf(format, args...))
}

// AnchorIDs numbers the distinct keys of the rows with has[i] in
// first-appearance order (gigpo's anchor states, Input.Anchor); a row
// without a key gets -1.
func AnchorIDs(keys []string, has []bool) []int32 {
	ids := make([]int32, len(keys))
	seen := map[string]int32{}
	for i, k := range keys {
		if !has[i] {
			ids[i] = -1
			continue
		}
		id, ok := seen[k]
		if !ok {
			id = int32(len(seen))
			seen[k] = id
		}
		ids[i] = id
	}
	return ids
}
