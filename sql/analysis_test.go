package sql_test

// Every canned analysis runs over the bundled stores (and over a store with
// the columns `rftpipe run` adds, built here) and its result is checked
// against an independent Go computation that streams the store with
// schema/store.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	rsql "github.com/rftpipe/rftpipe/sql"
	"github.com/rftpipe/rftpipe/sql/duckdb"
)

const (
	demoStore  = "../fixtures/stores/demo.parquet"
	multiStore = "../fixtures/stores/multi.parquet"
	dpoStore   = "../fixtures/stores/dpo.parquet"
)

// ---- running an analysis ----

type row map[string]any

func openDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := duckdb.Open(duckdb.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := duckdb.Attach(context.Background(), db, []duckdb.Store{{Path: path}}, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	return db
}

// run runs the named analysis over the store at path.
func run(t *testing.T, path, name string, vars map[string]string) []row {
	t.Helper()
	db := openDB(t, path)
	a, err := rsql.LookupAnalysis(name)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	q, err := duckdb.PrepareAnalysis(ctx, db, a, vars)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []row
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		r := row{}
		for i, c := range cols {
			r[c] = vals[i]
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// num converts a scanned number to float64 (NaN for NULL).
func num(v any) float64 {
	switch x := v.(type) {
	case nil:
		return math.NaN()
	case int64:
		return float64(x)
	case int32:
		return float64(x)
	case float64:
		return x
	case float32:
		return float64(x)
	case *big.Int:
		f, _ := new(big.Float).SetInt(x).Float64()
		return f
	}
	panic(fmt.Sprintf("not a number: %T %v", v, v))
}

// check compares result columns with expected values (NaN = NULL).
func check(t *testing.T, what string, r row, want map[string]float64) {
	t.Helper()
	for col, w := range want {
		v, ok := r[col]
		if !ok {
			t.Fatalf("%s: no column %s in %v", what, col, r)
		}
		got := num(v)
		if math.IsNaN(w) != math.IsNaN(got) || !math.IsNaN(w) && math.Abs(got-w) > 1e-9*math.Max(1, math.Abs(w)) {
			t.Errorf("%s: %s = %v, want %v", what, col, got, w)
		}
	}
}

// ---- the independent Go side ----

// scan streams the named columns of a store (all when none) batch by batch.
func scan(t *testing.T, path string, cols []string, fn func(rec arrow.Record, col func(string) arrow.Array)) {
	t.Helper()
	var opts []store.ReadOption
	if len(cols) > 0 {
		opts = append(opts, store.Columns(cols...))
	}
	r, err := store.Open(path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		fn(rec, func(name string) arrow.Array {
			idx := rec.Schema().FieldIndices(name)
			if len(idx) == 0 {
				t.Fatalf("%s: no column %s", path, name)
			}
			return rec.Column(idx[0])
		})
	}
}

func ival(a arrow.Array, i int) int64 {
	switch c := a.(type) {
	case *array.Int64:
		return c.Value(i)
	case *array.Int32:
		return int64(c.Value(i))
	}
	panic(fmt.Sprintf("not an int column: %T", a))
}

// stats is a plain two-pass summary of a sample.
type stats struct{ xs []float64 }

func (s *stats) add(x float64) { s.xs = append(s.xs, x) }
func (s *stats) n() int        { return len(s.xs) }
func (s *stats) sum() float64 {
	t := 0.0
	for _, x := range s.xs {
		t += x
	}
	return t
}
func (s *stats) mean() float64 {
	if len(s.xs) == 0 {
		return math.NaN()
	}
	return s.sum() / float64(len(s.xs))
}

// std is the unbiased std of the values divided by their largest
// magnitude, scaled back (finite for values near the double range).
func (s *stats) std() float64 {
	if len(s.xs) < 2 {
		return math.NaN()
	}
	scale := 0.0
	for _, x := range s.xs {
		scale = math.Max(scale, math.Abs(x))
	}
	if scale == 0 {
		return 0
	}
	m, ss := 0.0, 0.0
	for _, x := range s.xs {
		m += x / scale
	}
	m /= float64(len(s.xs))
	for _, x := range s.xs {
		ss += (x/scale - m) * (x/scale - m)
	}
	return scale * math.Sqrt(ss/float64(len(s.xs)-1))
}
func (s *stats) min() float64 {
	if len(s.xs) == 0 {
		return math.NaN()
	}
	return slices.Min(s.xs)
}
func (s *stats) max() float64 {
	if len(s.xs) == 0 {
		return math.NaN()
	}
	return slices.Max(s.xs)
}

// quantileDisc is the discrete quantile: the smallest observed value with at
// least a share q of the sample at or below it.
func (s *stats) quantileDisc(q float64) float64 {
	xs := slices.Clone(s.xs)
	sort.Float64s(xs)
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[max(i, 0)]
}

type tid struct{ batch, task int64 }

// ---- the analyses ----

func TestAnalysesParse(t *testing.T) {
	all := rsql.Analyses()
	var names []string
	for _, a := range all {
		names = append(names, a.Name)
		if a.Doc == "" || len(a.Requires) == 0 {
			t.Errorf("%s: header lacks its doc line or requires:", a.Name)
		}
		for _, c := range a.Requires {
			if _, ok := schema.Type(c); !ok {
				t.Errorf("%s: requires unknown column %s", a.Name, c)
			}
		}
		if !strings.HasSuffix(strings.TrimSpace(a.SQL), ";") {
			t.Errorf("%s: should end with one statement's ;", a.Name)
		}
	}
	for _, want := range []string{"reward_by_batch", "reward_by_model_version", "pass_at_k", "group_std", "group_filter",
		"response_length", "advantage_stats", "duplicates", "logprob_by_position"} {
		if !slices.Contains(names, want) {
			t.Errorf("no analysis %s (have %v)", want, names)
		}
	}
	if _, err := rsql.LookupAnalysis("nope"); !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), "group_std") {
		t.Errorf("unknown analysis: %v", err)
	}
}

func TestRewardByBatch(t *testing.T) {
	for _, path := range []string{demoStore, multiStore} {
		type agg struct {
			rows  int
			tasks map[int64]bool
			r     stats
		}
		want := map[int64]*agg{}
		scan(t, path, []string{"batch", "task", "reward"}, func(rec arrow.Record, col func(string) arrow.Array) {
			b, tk, rw := col("batch"), col("task"), col("reward").(*array.Float64)
			for i := 0; i < int(rec.NumRows()); i++ {
				a := want[ival(b, i)]
				if a == nil {
					a = &agg{tasks: map[int64]bool{}}
					want[ival(b, i)] = a
				}
				a.rows++
				a.tasks[ival(tk, i)] = true
				if rw.IsValid(i) && !math.IsNaN(rw.Value(i)) && !math.IsInf(rw.Value(i), 0) {
					a.r.add(rw.Value(i))
				}
			}
		})
		got := run(t, path, "reward_by_batch", nil)
		if len(got) != len(want) {
			t.Fatalf("%s: %d batches, want %d", path, len(got), len(want))
		}
		prev := int64(-1)
		for _, r := range got {
			b := r["batch"].(int64)
			if b <= prev {
				t.Errorf("batches out of order: %d after %d", b, prev)
			}
			prev = b
			w := want[b]
			check(t, fmt.Sprintf("%s batch %d", path, b), r, map[string]float64{
				"rows": float64(w.rows), "tasks": float64(len(w.tasks)), "rewarded": float64(w.r.n()),
				"reward_mean": w.r.mean(), "reward_std": w.r.std(), "reward_min": w.r.min(), "reward_max": w.r.max(),
			})
		}
	}
}

func TestRewardByModelVersion(t *testing.T) {
	type agg struct {
		rows       int
		batches    map[int64]bool
		minB, maxB int64
		r          stats
	}
	want := map[int64]*agg{}
	scan(t, demoStore, []string{"model_version", "batch", "reward"}, func(rec arrow.Record, col func(string) arrow.Array) {
		mv, b, rw := col("model_version"), col("batch"), col("reward").(*array.Float64)
		for i := 0; i < int(rec.NumRows()); i++ {
			a := want[ival(mv, i)]
			if a == nil {
				a = &agg{batches: map[int64]bool{}, minB: math.MaxInt64, maxB: math.MinInt64}
				want[ival(mv, i)] = a
			}
			a.rows++
			a.batches[ival(b, i)] = true
			a.minB, a.maxB = min(a.minB, ival(b, i)), max(a.maxB, ival(b, i))
			a.r.add(rw.Value(i))
		}
	})
	got := run(t, demoStore, "reward_by_model_version", nil)
	if len(got) != len(want) {
		t.Fatalf("%d model versions, want %d", len(got), len(want))
	}
	for _, r := range got {
		w := want[r["model_version"].(int64)]
		check(t, fmt.Sprint("model_version ", r["model_version"]), r, map[string]float64{
			"rows": float64(w.rows), "batches": float64(len(w.batches)), "first_batch": float64(w.minB), "last_batch": float64(w.maxB),
			"rewarded": float64(w.r.n()), "reward_mean": w.r.mean(), "reward_std": w.r.std(), "reward_min": w.r.min(), "reward_max": w.r.max(),
		})
	}
}

// binomialPassAtK is pass@k from exact binomial coefficients.
func binomialPassAtK(n, c, k int64) float64 {
	if k < 1 || k > n {
		return math.NaN()
	}
	num := new(big.Int).Binomial(n-c, k)
	if n-c < k {
		num.SetInt64(0)
	}
	ratio, _ := new(big.Rat).SetFrac(num, new(big.Int).Binomial(n, k)).Float64()
	return 1 - ratio
}

func TestPassAtK(t *testing.T) {
	for _, c := range []struct {
		path       string
		k          int64 // 0: runs per task
		passReward float64
		vars       map[string]string
	}{
		{demoStore, 0, 1, nil},
		{demoStore, 2, 1, map[string]string{"k": "2"}},
		{demoStore, 1, 0.5, map[string]string{"k": "1", "pass_reward": "0.5"}},
		{demoStore, 9, 1, map[string]string{"k": "9"}}, // k > runs: NULL
		{multiStore, 3, 1, map[string]string{"k": "3"}},
	} {
		type runKey struct {
			tid
			run int64
		}
		type last struct {
			step   int64
			reward float64
		}
		runs := map[runKey]last{}
		scan(t, c.path, []string{"batch", "task", "run", "step", "reward"}, func(rec arrow.Record, col func(string) arrow.Array) {
			b, tk, ru, st, rw := col("batch"), col("task"), col("run"), col("step"), col("reward").(*array.Float64)
			for i := 0; i < int(rec.NumRows()); i++ {
				k := runKey{tid{ival(b, i), ival(tk, i)}, ival(ru, i)}
				if l, ok := runs[k]; !ok || ival(st, i) > l.step {
					runs[k] = last{ival(st, i), rw.Value(i)}
				}
			}
		})
		type task struct {
			n, c int64
			r    stats
		}
		tasks := map[tid]*task{}
		for k, l := range runs {
			tk := tasks[k.tid]
			if tk == nil {
				tk = &task{}
				tasks[k.tid] = tk
			}
			tk.n++
			if l.reward >= c.passReward {
				tk.c++
			}
			tk.r.add(l.reward)
		}
		got := run(t, c.path, "pass_at_k", c.vars)
		if len(got) != len(tasks) {
			t.Fatalf("%s: %d tasks, want %d", c.path, len(got), len(tasks))
		}
		for _, r := range got {
			key := tid{r["batch"].(int64), r["task"].(int64)}
			w := tasks[key]
			k := c.k
			if k == 0 {
				k = w.n
			}
			check(t, fmt.Sprintf("%s %v k=%d", c.path, key, k), r, map[string]float64{
				"runs": float64(w.n), "successes": float64(w.c), "k": float64(k), "mean_at_k": w.r.mean(),
				"pass_at_k": binomialPassAtK(w.n, w.c, k),
			})
		}
	}
}

// groupStds returns the size and float32-reward std of every tid group.
func groupStds(t *testing.T, path string, float32Rewards bool) map[tid]*stats {
	groups := map[tid]*stats{}
	scan(t, path, []string{"batch", "task", "reward"}, func(rec arrow.Record, col func(string) arrow.Array) {
		b, tk, rw := col("batch"), col("task"), col("reward").(*array.Float64)
		for i := 0; i < int(rec.NumRows()); i++ {
			if rw.IsNull(i) || math.IsNaN(rw.Value(i)) || math.IsInf(rw.Value(i), 0) {
				continue // invalid rewards are left out, as the analyses do
			}
			k := tid{ival(b, i), ival(tk, i)}
			if groups[k] == nil {
				groups[k] = &stats{}
			}
			x := rw.Value(i)
			if float32Rewards {
				x = float64(float32(x))
			}
			groups[k].add(x)
		}
	})
	return groups
}

func TestGroupStd(t *testing.T) {
	for _, bucket := range []float64{0.1, 0.25} {
		groups := groupStds(t, demoStore, true)
		var zero, single int
		buckets := map[float64]int{}
		for _, g := range groups {
			switch {
			case g.n() == 1:
				single++
			case g.std() == 0:
				zero++
			default:
				buckets[math.Floor(g.std()/bucket)]++
			}
		}
		got := run(t, demoStore, "group_std", map[string]string{"bucket": fmt.Sprint(bucket)})
		total := float64(len(groups))
		seen := 0
		for _, r := range got {
			var want int
			switch r["std_range"] {
			case "std = 0":
				want = zero
				check(t, "zero bucket", r, map[string]float64{"std_from": 0, "std_to": 0})
			case "singleton":
				want = single
			default:
				b := math.Round(num(r["std_from"]) / bucket)
				want = buckets[b]
				check(t, fmt.Sprint("bucket ", r["std_range"]), r, map[string]float64{"std_to": (b + 1) * bucket})
				delete(buckets, b)
			}
			seen += want
			check(t, fmt.Sprint("bucket ", r["std_range"]), r, map[string]float64{"groups": float64(want), "share": float64(want) / total})
		}
		if len(buckets) > 0 || seen != len(groups) {
			t.Errorf("bucket %g: buckets %v missing; %d of %d groups seen", bucket, buckets, seen, len(groups))
		}
		if zero == 0 {
			t.Errorf("the demo store should have zero-variance groups")
		}
	}
}

func TestGroupFilter(t *testing.T) {
	for _, thr := range []float64{0, 0.4, 0.5} {
		groups := groupStds(t, demoStore, false)
		checkGroupFilter(t, demoStore, groups, thr, 0)
	}
}

// checkGroupFilter compares group_filter at std_threshold thr with the
// groups of the finite rewards of the store.
func checkGroupFilter(t *testing.T, path string, groups map[tid]*stats, thr float64, invalid int) {
	t.Helper()
	{
		var rows, single, zero, dropped, droppedRows int
		for _, g := range groups {
			rows += g.n()
			if g.n() == 1 {
				single++
			}
			if g.n() > 1 && g.std() == 0 {
				zero++
			}
			if g.n() == 1 || g.std() <= thr {
				dropped++
				droppedRows += g.n()
			}
		}
		got := run(t, path, "group_filter", map[string]string{"std_threshold": fmt.Sprint(thr)})
		if len(got) != 1 {
			t.Fatalf("%d rows, want 1", len(got))
		}
		G := float64(len(groups))
		check(t, fmt.Sprint("std_threshold ", thr), got[0], map[string]float64{
			"groups": G, "rows": float64(rows), "singleton_groups": float64(single), "invalid_rewards": float64(invalid),
			"zero_variance_groups": float64(zero), "zero_variance_share": float64(zero) / G, "std_threshold": thr,
			"dropped_groups": float64(dropped), "dropped_group_share": float64(dropped) / G,
			"dropped_rows": float64(droppedRows), "dropped_row_share": float64(droppedRows) / float64(rows),
		})
	}
}

func TestResponseLength(t *testing.T) {
	for _, path := range []string{demoStore, multiStore} {
		type agg struct {
			l            stats
			resp, prompt int
		}
		want := map[string]*agg{"all": {}}
		scan(t, path, []string{"batch", "action_mask", "truncate_status"}, func(rec arrow.Record, col func(string) arrow.Array) {
			b, am, ts := col("batch"), col("action_mask").(*array.List), col("truncate_status").(*array.String)
			for i := 0; i < int(rec.NumRows()); i++ {
				key := fmt.Sprint(ival(b, i))
				if want[key] == nil {
					want[key] = &agg{}
				}
				lo, hi := am.ValueOffsets(i)
				for _, a := range []*agg{want[key], want["all"]} {
					a.l.add(float64(hi - lo))
					if ts.IsValid(i) && ts.Value(i) == "response_truncated" {
						a.resp++
					}
					if ts.IsValid(i) && ts.Value(i) == "prompt_truncated" {
						a.prompt++
					}
				}
			}
		})
		got := run(t, path, "response_length", nil)
		if len(got) != len(want) || got[len(got)-1]["batch"] != "all" {
			t.Fatalf("%s: %d rows (last %v), want %d ending with all", path, len(got), got[len(got)-1]["batch"], len(want))
		}
		for _, r := range got {
			w := want[r["batch"].(string)]
			n := float64(w.l.n())
			check(t, fmt.Sprintf("%s batch %s", path, r["batch"]), r, map[string]float64{
				"rows": n, "mean_length": w.l.mean(), "min_length": w.l.min(), "max_length": w.l.max(),
				"p50_length": w.l.quantileDisc(0.5), "p95_length": w.l.quantileDisc(0.95),
				"response_truncated": float64(w.resp), "response_truncation_rate": float64(w.resp) / n,
				"prompt_truncated": float64(w.prompt), "prompt_truncation_rate": float64(w.prompt) / n,
			})
		}
		if want["all"].resp == 0 {
			t.Errorf("%s: the store should have truncated responses", path)
		}
	}
}

func TestLogprobByPosition(t *testing.T) {
	for _, c := range []struct {
		path   string
		bucket int
	}{{demoStore, 32}, {demoStore, 10}, {multiStore, 16}} {
		type agg struct {
			lp, p stats
			low   int
		}
		want := map[int]*agg{}
		scan(t, c.path, []string{"logprobs", "action_mask"}, func(rec arrow.Record, col func(string) arrow.Array) {
			lps, am := col("logprobs").(*array.List), col("action_mask").(*array.List)
			lv, mv := lps.ListValues().(*array.Float32), am.ListValues().(*array.Boolean)
			for i := 0; i < int(rec.NumRows()); i++ {
				lo, hi := lps.ValueOffsets(i)
				mlo, mhi := am.ValueOffsets(i)
				for p := 0; p < int(hi-lo) && p < int(mhi-mlo); p++ {
					if !mv.Value(int(mlo) + p) {
						continue
					}
					b := p / c.bucket
					if want[b] == nil {
						want[b] = &agg{}
					}
					x := float64(lv.Value(int(lo) + p))
					want[b].lp.add(x)
					want[b].p.add(math.Exp(x))
					if x < math.Log(0.1) {
						want[b].low++
					}
				}
			}
		})
		got := run(t, c.path, "logprob_by_position", map[string]string{"bucket": fmt.Sprint(c.bucket)})
		if len(got) != len(want) {
			t.Fatalf("%s: %d buckets, want %d", c.path, len(got), len(want))
		}
		for _, r := range got {
			b := int(num(r["pos_from"])) / c.bucket
			w := want[b]
			n := float64(w.lp.n())
			check(t, fmt.Sprintf("%s bucket %d", c.path, b), r, map[string]float64{
				"pos_from": float64(b * c.bucket), "pos_to": float64((b+1)*c.bucket - 1), "tokens": n,
				"mean_logprob": w.lp.mean(), "mean_prob": w.p.mean(), "low_share": float64(w.low) / n,
			})
		}
	}
}

// runStore writes what `rftpipe run` leaves: the demo store plus advantages
// and returns (GRPO scores times the action mask; none on batch 2's task 15)
// and, appended, copies of every batch's task 3 with duplicate_of set to the
// copied row's index.
func runStore(t *testing.T) string {
	t.Helper()
	mem := memory.DefaultAllocator
	r, err := store.Open(demoStore)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var recs []arrow.Record
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		rec.Retain()
		recs = append(recs, rec)
	}
	in := recs[0].Schema()
	idx := func(n string) int { return in.FieldIndices(n)[0] }
	// Group mean and std, for plausible advantages.
	groups := map[tid]*stats{}
	for _, rec := range recs {
		b, tk, rw := rec.Column(idx("batch")), rec.Column(idx("task")), rec.Column(idx("reward")).(*array.Float64)
		for i := 0; i < int(rec.NumRows()); i++ {
			k := tid{ival(b, i), ival(tk, i)}
			if groups[k] == nil {
				groups[k] = &stats{}
			}
			groups[k].add(rw.Value(i))
		}
	}
	fields := append(slices.Clone(in.Fields()), schema.Field(schema.Advantages), schema.Field(schema.Returns), schema.Field(schema.DuplicateOf))
	out := arrow.NewSchema(fields, nil)
	path := filepath.Join(t.TempDir(), "run.parquet")
	w, err := store.Create(path, out)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	var dupRows []arrow.Record // one-row slices of the copied rows
	var dupOf []int64
	var base int64
	for _, rec := range recs {
		b, tk, rw := rec.Column(idx("batch")), rec.Column(idx("task")), rec.Column(idx("reward")).(*array.Float64)
		am := rec.Column(idx("action_mask")).(*array.List)
		mv := am.ListValues().(*array.Boolean)
		adv := array.NewListBuilder(mem, arrow.PrimitiveTypes.Float32)
		vb := adv.ValueBuilder().(*array.Float32Builder)
		for i := 0; i < int(rec.NumRows()); i++ {
			k := tid{ival(b, i), ival(tk, i)}
			if k == (tid{2, 15}) {
				adv.AppendNull()
				continue
			}
			g := groups[k]
			score := float32((rw.Value(i) - g.mean()) / (g.std() + 1e-6))
			adv.Append(true)
			lo, hi := am.ValueOffsets(i)
			for p := lo; p < hi; p++ {
				if mv.Value(int(p)) {
					vb.Append(score)
				} else {
					vb.Append(0)
				}
			}
			if k.task == 3 {
				dupRows = append(dupRows, rec.NewSlice(int64(i), int64(i+1)))
				dupOf = append(dupOf, base+int64(i))
			}
		}
		advs := adv.NewArray()
		nulls := array.MakeArrayOfNull(mem, arrow.PrimitiveTypes.Int64, int(rec.NumRows()))
		cols := append(slices.Clone(rec.Columns()), advs, advs, nulls)
		if err := w.Write(array.NewRecord(out, cols, rec.NumRows())); err != nil {
			t.Fatal(err)
		}
		base += rec.NumRows()
	}
	// The copies: original columns, their advantages recomputed, duplicate_of set.
	var cols []arrow.Array
	for c := range in.Fields() {
		parts := make([]arrow.Array, len(dupRows))
		for i, d := range dupRows {
			parts[i] = d.Column(c)
		}
		cat, err := array.Concatenate(parts, mem)
		if err != nil {
			t.Fatal(err)
		}
		cols = append(cols, cat)
	}
	copies := array.NewRecord(in, cols, int64(len(dupRows)))
	adv := array.NewListBuilder(mem, arrow.PrimitiveTypes.Float32)
	vb := adv.ValueBuilder().(*array.Float32Builder)
	rw := copies.Column(idx("reward")).(*array.Float64)
	am := copies.Column(idx("action_mask")).(*array.List)
	for i := 0; i < int(copies.NumRows()); i++ {
		g := groups[tid{ival(copies.Column(idx("batch")), i), 3}]
		adv.Append(true)
		lo, hi := am.ValueOffsets(i)
		for p := lo; p < hi; p++ {
			vb.Append(float32((rw.Value(i) - g.mean()) / (g.std() + 1e-6)))
		}
	}
	advs := adv.NewArray()
	dup := array.NewInt64Builder(mem)
	dup.AppendValues(dupOf, nil)
	if err := w.Write(array.NewRecord(out, append(cols, advs, advs, dup.NewArray()), copies.NumRows())); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestAdvantageStats(t *testing.T) {
	path := runStore(t)
	type agg struct {
		rows, withAdv   int
		tokens          int
		tokSum          float64
		tokMin, tokMax  float64
		row             stats
		zero, pos, negv int
	}
	newAgg := func() *agg { return &agg{tokMin: math.Inf(1), tokMax: math.Inf(-1)} }
	want := map[string]*agg{"all": newAgg()}
	scan(t, path, []string{"batch", "advantages", "action_mask"}, func(rec arrow.Record, col func(string) arrow.Array) {
		b, adv, am := col("batch"), col("advantages").(*array.List), col("action_mask").(*array.List)
		av, mv := adv.ListValues().(*array.Float32), am.ListValues().(*array.Boolean)
		for i := 0; i < int(rec.NumRows()); i++ {
			key := fmt.Sprint(ival(b, i))
			if want[key] == nil {
				want[key] = newAgg()
			}
			for _, a := range []*agg{want[key], want["all"]} {
				a.rows++
				if adv.IsNull(i) {
					continue
				}
				lo, hi := adv.ValueOffsets(i)
				mlo, _ := am.ValueOffsets(i)
				var s stats
				for p := 0; p < int(hi-lo); p++ {
					if mv.Value(int(mlo) + p) {
						x := float64(av.Value(int(lo) + p))
						s.add(x)
						a.tokMin, a.tokMax = math.Min(a.tokMin, x), math.Max(a.tokMax, x)
					}
				}
				a.tokens += s.n()
				a.tokSum += s.sum()
				if s.n() == 0 {
					continue
				}
				a.withAdv++
				m := s.mean()
				a.row.add(m)
				switch {
				case m == 0:
					a.zero++
				case m > 0:
					a.pos++
				default:
					a.negv++
				}
			}
		}
	})
	got := run(t, path, "advantage_stats", nil)
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
	for _, r := range got {
		w := want[r["batch"].(string)]
		n := float64(w.withAdv)
		check(t, fmt.Sprint("batch ", r["batch"]), r, map[string]float64{
			"rows": float64(w.rows), "rows_with_advantages": n, "tokens": float64(w.tokens),
			"token_mean": w.tokSum / float64(w.tokens), "token_min": w.tokMin, "token_max": w.tokMax,
			"row_mean": w.row.mean(), "row_std": w.row.std(),
			"zero_share": float64(w.zero) / n, "positive_share": float64(w.pos) / n, "negative_share": float64(w.negv) / n,
		})
	}
	if a := want["all"]; a.withAdv == a.rows || a.zero == 0 {
		t.Errorf("the run store should have rows without advantages and zero advantages: %+v", a)
	}
}

func TestDuplicates(t *testing.T) {
	path := runStore(t)
	type agg struct {
		rows, dup         int
		groups, dupGroups map[tid]bool
		sources           map[int64]bool
	}
	newAgg := func() *agg { return &agg{groups: map[tid]bool{}, dupGroups: map[tid]bool{}, sources: map[int64]bool{}} }
	want := map[string]*agg{"all": newAgg()}
	scan(t, path, []string{"batch", "task", "duplicate_of"}, func(rec arrow.Record, col func(string) arrow.Array) {
		b, tk, d := col("batch"), col("task"), col("duplicate_of").(*array.Int64)
		for i := 0; i < int(rec.NumRows()); i++ {
			key := fmt.Sprint(ival(b, i))
			if want[key] == nil {
				want[key] = newAgg()
			}
			k := tid{ival(b, i), ival(tk, i)}
			for _, a := range []*agg{want[key], want["all"]} {
				a.rows++
				a.groups[k] = true
				if d.IsValid(i) {
					a.dup++
					a.dupGroups[k] = true
					a.sources[d.Value(i)] = true
				}
			}
		}
	})
	got := run(t, path, "duplicates", nil)
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
	for _, r := range got {
		w := want[r["batch"].(string)]
		check(t, fmt.Sprint("batch ", r["batch"]), r, map[string]float64{
			"rows": float64(w.rows), "duplicated_rows": float64(w.dup), "duplicated_share": float64(w.dup) / float64(w.rows),
			"groups": float64(len(w.groups)), "duplicated_groups": float64(len(w.dupGroups)), "sources": float64(len(w.sources)),
		})
	}
	if want["all"].dup == 0 {
		t.Error("the run store should have duplicated rows")
	}
}

// An analysis over a store without its columns says which and where they
// come from, as bad input.
func TestAnalysisMissingColumn(t *testing.T) {
	for _, c := range []struct{ path, name, wantMsg string }{
		{demoStore, "advantage_stats", "rftpipe run"},
		{demoStore, "duplicates", "duplicate_of"},
		{dpoStore, "reward_by_batch", "reward"},
	} {
		db := openDB(t, c.path)
		a, _ := rsql.LookupAnalysis(c.name)
		_, err := duckdb.PrepareAnalysis(context.Background(), db, a, nil)
		if !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), c.wantMsg) {
			t.Errorf("%s on %s: %v; want bad input mentioning %q", c.name, c.path, err, c.wantMsg)
		}
	}
	db := openDB(t, demoStore)
	a, _ := rsql.LookupAnalysis("group_filter")
	if _, err := duckdb.PrepareAnalysis(context.Background(), db, a, map[string]string{"nope": "1"}); !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), "std_threshold") {
		t.Errorf("unknown variable: %v", err)
	}
}

// badRewardStore writes the demo store with some rewards NaN, some
// infinite and some null (and an experiment column, as a table's), and
// returns its path and the number of them.
func badRewardStore(t *testing.T) (string, int) {
	t.Helper()
	db := openDB(t, demoStore)
	path := filepath.Join(t.TempDir(), "bad_rewards.parquet")
	_, err := db.Exec(`COPY (SELECT * REPLACE (CASE
			WHEN run = 0 AND task % 3 = 0 THEN 'NaN'::DOUBLE
			WHEN run = 1 AND task % 5 = 0 THEN 'Infinity'::DOUBLE
			WHEN run = 2 AND task % 4 = 0 THEN NULL
			WHEN batch = 2 AND task = 1 THEN NULL
			ELSE reward END AS reward), 'demo' AS experiment FROM experiences) TO '` + path + `' (FORMAT parquet)`)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM '` + path + `' WHERE reward IS NULL OR NOT isfinite(reward)`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return path, n
}

// TestInvalidRewards checks that every canned analysis reading rewards runs
// on a store with NaN, infinite and null rewards, leaves them out of the
// statistics and counts them.
func TestInvalidRewards(t *testing.T) {
	path, invalid := badRewardStore(t)
	if invalid == 0 {
		t.Fatal("no invalid rewards written")
	}
	for _, a := range rsql.Analyses() {
		if !slices.Contains(a.Requires, "reward") || slices.Contains(a.Requires, schema.DropReason) {
			continue // drop_reasons reads a rejected-rows store (cmd: TestRejectedEveryReason)
		}
		t.Run(a.Name, func(t *testing.T) {
			if rows := run(t, path, a.Name, nil); len(rows) == 0 {
				t.Error("no rows")
			}
		})
	}
	checkGroupFilter(t, path, groupStds(t, path, false), 0, invalid)
	checkGroupFilter(t, path, groupStds(t, path, false), 0.45, invalid)
	groups := groupStds(t, path, true)

	// group_std: the buckets count the groups of finite rewards; a last
	// row counts the invalid ones.
	var total float64
	for _, r := range run(t, path, "group_std", nil) {
		if r["std_range"] == "invalid rewards (rows)" {
			check(t, "invalid row", r, map[string]float64{"groups": float64(invalid)})
			continue
		}
		total += num(r["groups"])
	}
	if total != float64(len(groups)) {
		t.Errorf("group_std counts %g groups, want %d", total, len(groups))
	}

	// pass_at_k: runs count finite rewards only; invalid_runs the others.
	var runs, bad float64
	for _, r := range run(t, path, "pass_at_k", nil) {
		runs += num(r["runs"])
		bad += num(r["invalid_runs"])
		if p := num(r["pass_at_k"]); !math.IsNaN(p) && (p < 0 || p > 1) {
			t.Errorf("pass@k %g", p)
		}
	}
	if runs != float64(384-invalid) || bad != float64(invalid) {
		t.Errorf("pass_at_k: %g runs, %g invalid; want %d, %d", runs, bad, 384-invalid, invalid)
	}
}

// TestGroupFilterWideRewards: group_filter takes any finite reward as a
// double (a reward past float32's range, 1e308, is neither refused nor
// narrowed) and a negative std_threshold, as grpo's.
func TestGroupFilterWideRewards(t *testing.T) {
	db := openDB(t, demoStore)
	path := filepath.Join(t.TempDir(), "wide_rewards.parquet")
	_, err := db.Exec(`COPY (SELECT * REPLACE (CASE WHEN batch = 0 AND task = 0 THEN 1e308 * reward
			WHEN batch = 0 AND task = 1 THEN -1e308 ELSE reward END AS reward) FROM experiences) TO '` + path + `' (FORMAT parquet)`)
	if err != nil {
		t.Fatal(err)
	}
	groups := groupStds(t, path, false)
	for _, thr := range []float64{0, 0.3, -1} {
		checkGroupFilter(t, path, groups, thr, 0)
	}
}

// TestGroupFilterDefault checks that group_filter's default is grpo's: no
// std_threshold, nothing dropped, and the output says so.
func TestGroupFilterDefault(t *testing.T) {
	got := run(t, demoStore, "group_filter", nil)
	if len(got) != 1 {
		t.Fatalf("%d rows", len(got))
	}
	r := got[0]
	if r["std_threshold"] != nil || num(r["dropped_groups"]) != 0 || !strings.Contains(fmt.Sprint(r["rule"]), "grpo default") {
		t.Errorf("default: %v", r)
	}
}

// TestZeroVariance checks the zero-variance task list against the groups
// computed here, on a store with invalid rewards too.
func TestZeroVariance(t *testing.T) {
	path, _ := badRewardStore(t)
	for _, p := range []string{demoStore, path} {
		groups := groupStds(t, p, true)
		want := map[tid]float64{}
		for k, g := range groups {
			if g.n() > 1 && g.std() == 0 {
				want[k] = g.xs[0]
			}
		}
		got := run(t, p, "zero_variance", nil)
		if len(got) != len(want) || len(want) == 0 {
			t.Fatalf("%s: %d zero-variance groups, want %d (> 0)", p, len(got), len(want))
		}
		for _, r := range got {
			k := tid{int64(num(r["batch"])), int64(num(r["task"]))}
			w, ok := want[k]
			if !ok {
				t.Errorf("%s: group %v listed", p, k)
				continue
			}
			check(t, fmt.Sprint(k), r, map[string]float64{"rows": float64(groups[k].n()), "reward": w})
		}
	}
}

// TestDropReasons: per reason and batch, and over every batch, drop_reasons
// counts the rows and the groups they come from; a group is a (batch, task)
// pair, so a task id dropped in two batches is two groups in the 'all' row.
func TestDropReasons(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rejected.parquet")
	if _, err := openDB(t, demoStore).Exec(`COPY (SELECT *, CASE WHEN reward > 0.5 THEN 'high' ELSE 'low' END AS drop_reason,
			'op' AS dropped_by FROM experiences) TO '` + path + `' (FORMAT parquet)`); err != nil {
		t.Fatal(err)
	}
	type agg struct {
		rows   int
		groups map[tid]bool
	}
	want := map[string]*agg{}
	scan(t, path, []string{"batch", "task", "reward"}, func(rec arrow.Record, col func(string) arrow.Array) {
		b, tk, r := col("batch"), col("task"), col("reward").(*array.Float64)
		for i := 0; i < int(rec.NumRows()); i++ {
			reason := "low"
			if r.Value(i) > 0.5 {
				reason = "high"
			}
			for _, key := range []string{reason + "/" + fmt.Sprint(ival(b, i)), reason + "/all"} {
				if want[key] == nil {
					want[key] = &agg{groups: map[tid]bool{}}
				}
				want[key].rows++
				want[key].groups[tid{ival(b, i), ival(tk, i)}] = true
			}
		}
	})
	got := run(t, path, "drop_reasons", nil)
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
	for _, r := range got {
		key := fmt.Sprint(r["drop_reason"], "/", r["batch"])
		w := want[key]
		if w == nil {
			t.Fatalf("unexpected row %v", r)
		}
		check(t, key, r, map[string]float64{"rows": float64(w.rows), "groups": float64(len(w.groups))})
	}
	if a := want["low/all"]; a == nil || len(a.groups) <= 16 {
		t.Errorf("the store should drop one task id in several batches: %v", a)
	}
}
