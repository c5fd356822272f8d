package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/schema/synth"
)

const stores = "../fixtures/stores/"

// table is a store read back into Go values.
type table struct {
	tid      []string
	rid      []string
	reward   []float64
	suffix   []string
	mask     [][]bool
	adv, ret [][]float32
	dupOf    []int64 // -1: null
	hasDupOf bool
}

func readTable(t *testing.T, path string) *table {
	t.Helper()
	r, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	out := &table{}
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		col := func(name string) arrow.Array {
			if idx := rec.Schema().FieldIndices(name); len(idx) > 0 {
				return rec.Column(idx[0])
			}
			return nil
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			out.tid = append(out.tid, string(schema.AppendKey(nil, i, col(schema.Batch), col(schema.Task))))
			if c := col(schema.Run); c != nil {
				out.rid = append(out.rid, string(schema.AppendKey(nil, i, col(schema.Batch), col(schema.Task), c)))
			}
			rw := col(schema.Reward).(*array.Float64)
			v := rw.Value(i)
			if rw.IsNull(i) {
				v = math.NaN()
			}
			out.reward = append(out.reward, v)
			out.suffix = append(out.suffix, col(schema.Suffix).ValueStr(i))
			out.mask = append(out.mask, listRow[bool](col(schema.ActionMask), i))
			if c := col(schema.Advantages); c != nil {
				out.adv = append(out.adv, listRow[float32](c, i))
				out.ret = append(out.ret, listRow[float32](col(schema.Returns), i))
			}
			if c := col(schema.DuplicateOf); c != nil {
				out.hasDupOf = true
				d := int64(-1)
				if c.IsValid(i) {
					d = c.(*array.Int64).Value(i)
				}
				out.dupOf = append(out.dupOf, d)
			}
		}
	}
}

func listRow[T bool | float32](a arrow.Array, i int) []T {
	l := a.(*array.List)
	if l.IsNull(i) {
		return nil
	}
	lo, hi := l.ValueOffsets(i)
	out := make([]T, 0, hi-lo)
	for k := lo; k < hi; k++ {
		switch v := l.ListValues().(type) {
		case *array.Boolean:
			out = append(out, any(v.Value(int(k))).(T))
		case *array.Float32:
			out = append(out, any(v.Value(int(k))).(T))
		}
	}
	return out
}

// grpoScores computes GRPO scores independently of the stage: per tid, float64
// mean and unbiased std of the float32 rewards; singletons mean 0, std 1.
func grpoScores(tid []string, reward []float64, eps float64) []float64 {
	groups := map[string][]int{}
	for i, k := range tid {
		groups[k] = append(groups[k], i)
	}
	out := make([]float64, len(tid))
	for _, rows := range groups {
		mean, std := 0.0, 1.0
		if n := float64(len(rows)); n > 1 {
			mean = 0
			for _, r := range rows {
				mean += float64(float32(reward[r]))
			}
			mean /= n
			ss := 0.0
			for _, r := range rows {
				d := float64(float32(reward[r])) - mean
				ss += d * d
			}
			std = math.Sqrt(ss / (n - 1))
		}
		for _, r := range rows {
			out[r] = (reward[r] - mean) / (std + eps)
		}
	}
	return out
}

func close32(a float32, b float64) bool {
	return math.Abs(float64(a)-b) <= 1e-6+1e-5*math.Abs(b)
}

// checkBroadcast checks advantages = returns = score × mask on every row.
func checkBroadcast(t *testing.T, out *table, score func(i int) float64) {
	t.Helper()
	for i := range out.adv {
		if len(out.adv[i]) != len(out.mask[i]) {
			t.Fatalf("row %d: %d advantages for %d mask positions", i, len(out.adv[i]), len(out.mask[i]))
		}
		want := score(i)
		for k, m := range out.mask[i] {
			w := 0.0
			if m {
				w = want
			}
			if !close32(out.adv[i][k], w) || out.ret[i][k] != out.adv[i][k] {
				t.Fatalf("row %d token %d: advantage %v return %v, want %v", i, k, out.adv[i][k], out.ret[i][k], w)
			}
		}
	}
}

func run(t *testing.T, job Job) *Result {
	t.Helper()
	if job.Out == "" {
		job.Out = filepath.Join(t.TempDir(), "out.parquet")
	}
	res, err := Run(context.Background(), job)
	if err != nil {
		t.Fatalf("Run(%s over %s): %v", job.Stages[0].Name(), job.In, err)
	}
	return res
}

func TestGRPOMatchesIndependentComputation(t *testing.T) {
	for _, in := range []string{"demo.parquet", "demo.jsonl", "multi.parquet"} {
		t.Run(in, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out.parquet")
			res := run(t, withFn(t, Job{In: stores + in, Out: out}, "grpo", ""))
			src := readTable(t, stores+in)
			got := readTable(t, out)
			if res.In != int64(len(src.tid)) || res.Out != res.In || len(got.tid) != len(src.tid) {
				t.Fatalf("in %d out %d rows %d, want all %d", res.In, res.Out, len(got.tid), len(src.tid))
			}
			for i := range src.tid { // input order kept
				if got.tid[i] != src.tid[i] || got.suffix[i] != src.suffix[i] {
					t.Fatalf("row %d is %s/%s, want %s/%s", i, got.tid[i], got.suffix[i], src.tid[i], src.suffix[i])
				}
			}
			want := grpoScores(src.tid, src.reward, 1e-6)
			checkBroadcast(t, got, func(i int) float64 { return want[i] })
			for _, k := range []string{
				"experience_pipeline/group_advantages/reward_mean/mean", "experience_pipeline/group_advantages/reward_mean/max",
				"experience_pipeline/group_advantages/reward_mean/min", "experience_pipeline/group_advantages/reward_std/mean",
				"experience_pipeline/filtered_count", "experience_pipeline/experience_count", "time/experience_pipeline/total",
			} {
				if _, ok := res.Metrics[k]; !ok {
					t.Errorf("metric %s missing (have %v)", k, res.Metrics.Names())
				}
			}
			if res.Metrics["experience_pipeline/experience_count"] != float64(res.Out) {
				t.Errorf("experience_count %v, want %d", res.Metrics["experience_pipeline/experience_count"], res.Out)
			}
		})
	}
}

// TestEveryStage runs every pipeline-side fn, filter and add strategy over a
// bundled store and checks the counts add up and the scores are broadcast.
func TestEveryStage(t *testing.T) {
	cases := []struct {
		fn, strategy string
		in           string
		args         []string
	}{
		{fn: "grpo", in: "demo.parquet", args: []string{"std_threshold=0"}},
		{fn: "grpo", in: "demo.parquet", args: []string{"rank_penalty=0.25", "std_cal_level=batch"}},
		{fn: "step_wise_grpo", in: "multi.parquet"},
		{fn: "step_wise_grpo", in: "multi.parquet", args: []string{"enable_step_norm=true", "std_threshold=0", "last_by_eid_step=true"}},
		{fn: "opmd", in: "demo.parquet"},
		{fn: "asymre", in: "demo.parquet"},
		{fn: "rec", in: "demo.parquet", args: []string{"drop=balance"}},
		{fn: "reinforce", in: "multi.parquet"},
		{fn: "reward_std_filter", in: "demo.parquet"},
		{fn: "invalid_reward_filter", in: "demo.parquet"},
		{strategy: "grpo", in: "demo.parquet"},
		{strategy: "opmd", in: "demo.parquet"},
		{strategy: "step_wise_grpo", in: "multi.parquet"},
		{strategy: "reward_variance", in: "demo.parquet"},
		{strategy: "correct_bias", in: "demo.parquet"},
		{strategy: "duplicate_informative", in: "demo.parquet"},
	}
	for _, c := range cases {
		name := c.fn + c.strategy + "/" + c.in + "/" + strings.Join(c.args, ",")
		if c.strategy != "" {
			name = "strategy_" + name
		}
		t.Run(name, func(t *testing.T) {
			job := withFn(t, Job{In: stores + c.in, Out: filepath.Join(t.TempDir(), "out.parquet"), Seed: 1}, c.fn, c.strategy, c.args...)
			res := run(t, job)
			got := readTable(t, job.Out)
			if int64(len(got.tid)) != res.Out || res.Out != res.In-res.Filtered+res.Duplicated {
				t.Fatalf("in %d filtered %d duplicated %d out %d, read %d", res.In, res.Filtered, res.Duplicated, res.Out, len(got.tid))
			}
			if got.adv != nil {
				// Every row's advantages are one score broadcast over its mask.
				checkBroadcast(t, got, func(i int) float64 {
					for k, m := range got.mask[i] {
						if m {
							return float64(got.adv[i][k])
						}
					}
					return 0
				})
			}
		})
	}
}

func TestDeterministicBytes(t *testing.T) {
	for _, args := range [][]string{nil, {"std_threshold=0", "duplicate_experiences=true"}} {
		t.Run(strings.Join(args, ","), func(t *testing.T) {
			dir := t.TempDir()
			var sums [3][32]byte
			for k, seed := range []uint64{7, 7, 8} {
				job := withFn(t, Job{In: stores + "demo.parquet", Out: filepath.Join(dir, fmt.Sprintf("o%d.parquet", k)), Seed: seed}, "grpo", "", args...)
				run(t, job)
				b, err := os.ReadFile(job.Out)
				if err != nil {
					t.Fatal(err)
				}
				sums[k] = sha256.Sum256(b)
			}
			if sums[0] != sums[1] {
				t.Fatal("same input and seed gave different bytes")
			}
			if args != nil && sums[0] == sums[2] {
				t.Error("another seed gave the same duplicates")
			}
		})
	}
}

func TestDuplication(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out.parquet")
	job := withFn(t, Job{In: stores + "demo.parquet", Out: out, Seed: 3}, "grpo", "", "std_threshold=0", "duplicate_experiences=true")
	res := run(t, job)
	src, got := readTable(t, job.In), readTable(t, out)
	if res.Duplicated == 0 || res.Filtered == 0 || !got.hasDupOf {
		t.Fatalf("filtered %d duplicated %d, duplicate_of column %v: want some of each", res.Filtered, res.Duplicated, got.hasDupOf)
	}
	want := grpoScores(src.tid, src.reward, 1e-6)
	uids := map[string]bool{}
	originals := int(res.Out - res.Duplicated)
	for i := range got.tid {
		if uid := got.tid[i] + "/" + got.rid[i] + "/" + got.suffix[i]; uids[uid] {
			t.Fatalf("row %d: uid %s repeated", i, uid)
		} else {
			uids[uid] = true
		}
		d := got.dupOf[i]
		if (i < originals) != (d < 0) {
			t.Fatalf("row %d: duplicate_of %d; copies must come after the %d originals", i, d, originals)
		}
		if d >= 0 && (got.tid[i] != src.tid[d] || got.reward[i] != src.reward[d] || got.suffix[i] == src.suffix[d]) {
			t.Fatalf("row %d copies row %d badly: %s %v %s vs %s %v %s", i, d, got.tid[i], got.reward[i], got.suffix[i], src.tid[d], src.reward[d], src.suffix[d])
		}
	}
	checkBroadcast(t, got, func(i int) float64 {
		if d := got.dupOf[i]; d >= 0 {
			return want[d]
		}
		return want[indexOf(src, got, i)]
	})
}

// indexOf finds output row i of got in src by its uid parts.
func indexOf(src, got *table, i int) int {
	for j := range src.tid {
		if src.rid[j] == got.rid[i] && src.suffix[j] == got.suffix[i] {
			return j
		}
	}
	return -1
}

// exp is one row of a hand-made store.
type exp struct {
	batch, task int64
	run         int32
	reward      any // float64 or nil
	mask        []bool
	logprobs    []float32
}

func writeExps(t *testing.T, path string, rows []exp) {
	t.Helper()
	sc := schema.New(schema.Batch, schema.Task, schema.Run, schema.Step, schema.Suffix, schema.Reward, schema.Logprobs, schema.ActionMask)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for i, r := range rows {
		b.Field(0).(*array.Int64Builder).Append(r.batch)
		b.Field(1).(*array.Int64Builder).Append(r.task)
		b.Field(2).(*array.Int32Builder).Append(r.run)
		b.Field(3).(*array.Int32Builder).Append(0)
		b.Field(4).(*array.StringBuilder).Append(fmt.Sprintf("%06x", i))
		if f, ok := r.reward.(float64); ok {
			b.Field(5).(*array.Float64Builder).Append(f)
		} else {
			b.Field(5).AppendNull()
		}
		lp := b.Field(6).(*array.ListBuilder)
		lp.Append(true)
		lp.ValueBuilder().(*array.Float32Builder).AppendValues(r.logprobs, nil)
		m := b.Field(7).(*array.ListBuilder)
		m.Append(true)
		m.ValueBuilder().(*array.BooleanBuilder).AppendValues(r.mask, nil)
	}
	rec := b.NewRecord()
	defer rec.Release()
	w, err := store.Create(path, sc)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

func group(task int64, rewards ...any) []exp {
	var out []exp
	for i, r := range rewards {
		out = append(out, exp{task: task, run: int32(i), reward: r, mask: []bool{true, false, true}, logprobs: []float32{-1, 0, -0.5}})
	}
	return out
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	path := func(name string, rows []exp) string {
		p := filepath.Join(dir, name)
		writeExps(t, p, rows)
		return p
	}
	ragged := group(0, 1.0, 0.0)
	ragged[1].logprobs = []float32{-1}
	nan := append(group(0, 1.0, 0.0), group(1, 1.0, math.NaN(), 0.0)...)
	cases := []struct {
		name         string
		in           string
		fn, strategy string
		args         []string
		want         string // substring of the error
	}{
		{"missing reward", stores + "dpo.parquet", "grpo", "", nil, `column "reward": missing required column`},
		{"ragged masks", path("ragged.parquet", ragged), "grpo", "", nil, `row 1: column "action_mask": ragged row`},
		{"NaN reward", path("nan.parquet", nan), "grpo", "", nil, `nan.parquet: row 3: column "reward": reward is NaN`},
		{"null reward", path("null.parquet", group(0, 1.0, nil)), "grpo", "", nil, `row 1: column "reward": null reward`},
		{"unknown fn", stores + "demo.parquet", "grpoo", "", nil, `unknown advantage fn "grpoo"`},
		{"trainer fn without values", stores + "demo.parquet", "ppo", "", nil, "missing column values"},
		{"unknown arg", stores + "demo.parquet", "grpo", "", []string{"std_treshold=0"}, "unknown argument std_treshold"},
		{"bad arg value", stores + "demo.parquet", "grpo", "", []string{"epsilon=abc"}, "epsilon"},
		{"bad enum", stores + "demo.parquet", "grpo", "", []string{"std_cal_level=task"}, "std_cal_level"},
		{"unknown strategy", stores + "demo.parquet", "", "nope", nil, `"nope"`},
		{"no input", filepath.Join(dir, "absent.parquet"), "grpo", "", nil, "no such file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".out.parquet")
			st, err := stagesOf(c.fn, c.strategy, c.args)
			if err == nil {
				_, err = Run(context.Background(), Job{In: c.in, Out: out, Stages: st})
			}
			if err == nil || !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v; want bad input containing %q", err, c.want)
			}
			assertNothingWritten(t, dir, out)
		})
	}
}

// assertNothingWritten checks that out does not exist and no temp file is left in dir.
func assertNothingWritten(t *testing.T, dir, out string) {
	t.Helper()
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s exists after a failed run", out)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".*.tmp"))
	if len(left) > 0 {
		t.Errorf("temp files left: %v", left)
	}
}

func TestInvalidRewardDrop(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.parquet")
	rows := append(group(0, 1.0, math.NaN(), 0.0), group(1, nil, 2.0, 4.0)...)
	writeExps(t, in, rows)
	out := filepath.Join(dir, "out.parquet")
	res := run(t, withFn(t, Job{In: in, Out: out, OnInvalidReward: InvalidDrop}, "grpo", ""))
	if res.InvalidDropped != 2 || res.Out != 4 || res.Metrics["experience_pipeline/invalid_reward_filter/filtered_count"] != 2 {
		t.Fatalf("dropped %d, out %d, metrics %v", res.InvalidDropped, res.Out, res.Metrics)
	}
	got := readTable(t, out)
	// Group 0 is {1, 0}, group 1 is {2, 4}: scores ±1/√2 each.
	s := 1 / math.Sqrt2 / (1 + 1e-6/math.Sqrt2)
	want := []float64{s, -s, -s, s}
	checkBroadcast(t, got, func(i int) float64 { return want[i] })
}

func TestEmptyAndAllFiltered(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.parquet")
	writeExps(t, empty, nil)
	flat := filepath.Join(dir, "flat.parquet")
	writeExps(t, flat, append(group(0, 1.0, 1.0), group(1, 0.5)...))
	for _, c := range []struct {
		name, in       string
		wantIn         int64
		wantFiltered   float64
		wantGroupStats bool
	}{
		{"empty store", empty, 0, 0, false},
		{"every group filtered", flat, 3, 3, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, c.name+".parquet")
			job := withFn(t, Job{In: c.in, Out: out}, "grpo", "", "std_threshold=0", "duplicate_experiences=true")
			res := run(t, job)
			if res.In != c.wantIn || res.Out != 0 || res.Metrics["experience_pipeline/filtered_count"] != c.wantFiltered {
				t.Fatalf("in %d out %d metrics %v", res.In, res.Out, res.Metrics)
			}
			if _, ok := res.Metrics["experience_pipeline/group_advantages/reward_mean/mean"]; ok != c.wantGroupStats {
				t.Errorf("group metrics present = %v, want %v", ok, c.wantGroupStats)
			}
			if got := readTable(t, out); len(got.tid) != 0 {
				t.Fatalf("%d rows written, want an empty store", len(got.tid))
			}
		})
	}
}

func TestNeverOverInput(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.parquet")
	writeExps(t, in, group(0, 1.0, 0.0))
	before, _ := os.ReadFile(in)
	_, err := Run(context.Background(), withFn(t, Job{In: in, Out: in}, "grpo", ""))
	if err == nil || !strings.Contains(err.Error(), "overwrite the input") {
		t.Fatalf("err = %v, want a refusal", err)
	}
	run(t, withFn(t, Job{In: in, Out: filepath.Join(dir, "out.parquet")}, "grpo", ""))
	after, _ := os.ReadFile(in)
	if !bytes.Equal(before, after) {
		t.Fatal("input modified")
	}
}

// TestTakeRows: rows picked out of order, repeated and in runs come out as
// the rows of the input, list and null values included; two columns that
// are one array (returns set to advantages) come out one array.
func TestTakeRows(t *testing.T) {
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Float32), Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for i := 0; i < 10; i++ {
		l := b.Field(1).(*array.ListBuilder)
		if i%4 == 1 {
			b.Field(0).AppendNull()
			l.AppendNull()
			continue
		}
		b.Field(0).(*array.StringBuilder).Append(fmt.Sprint("r", i))
		l.Append(true)
		for k := 0; k < i; k++ {
			l.ValueBuilder().(*array.Float32Builder).Append(float32(i*100 + k))
		}
	}
	built := b.NewRecord()
	defer built.Release()
	rec := array.NewRecord(arrow.NewSchema(append(sc.Fields(), arrow.Field{Name: "same", Type: sc.Field(1).Type, Nullable: true}), nil),
		append(built.Columns(), built.Column(1)), built.NumRows())
	defer rec.Release()
	for _, idx := range [][]int64{{0, 1, 2, 3}, {4, 5, 6, 9}, {9, 1, 1, 2, 3, 7, 0, 0}, {5}, {}} {
		got, err := takeRows(rec, idx)
		if err != nil {
			t.Fatal(err)
		}
		if got.NumRows() != int64(len(idx)) {
			t.Fatalf("%v: %d rows", idx, got.NumRows())
		}
		if got.Column(2) != got.Column(1) {
			t.Errorf("%v: one array taken as two", idx)
		}
		for k, i := range idx {
			for c := 0; c < 3; c++ {
				if g, w := got.Column(c).ValueStr(k), rec.Column(c).ValueStr(int(i)); g != w {
					t.Errorf("%v: row %d column %d is %s, want row %d's %s", idx, k, c, g, i, w)
				}
			}
		}
		got.Release()
	}
}

// TestDamagedStoreNamesRowGroup: a store whose footer is intact but whose
// data pages are cut makes DuckDB's group pass fail in words of its own
// ("don't know what type"); the job then fails as bad input naming the row
// group and column, as the store reader finds them.
func TestDamagedStoreNamesRowGroup(t *testing.T) {
	dir := t.TempDir()
	whole := filepath.Join(dir, "whole.parquet")
	cfg := synth.Default()
	cfg.Tasks, cfg.Runs, cfg.PromptLen, cfg.RespMin, cfg.RespMax, cfg.Seed = 5000, 8, 4, 16, 16, 1
	w, err := store.Create(whole, cfg.Schema())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if err := synth.Generate(context.Background(), cfg, w.Write); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(whole)
	if err != nil {
		t.Fatal(err)
	}
	n := int(binary.LittleEndian.Uint32(b[len(b)-8:]))
	data, footer := b[:len(b)-8-n], b[len(b)-8-n:]
	cut := filepath.Join(dir, "cut.parquet")
	if err := os.WriteFile(cut, append(data[:len(data)/2:len(data)/2], footer...), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Run(context.Background(), withFn(t, Job{In: cut, Out: filepath.Join(dir, "out.parquet")}, "grpo", ""))
	if !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), "row group") || !strings.Contains(err.Error(), "cut.parquet") {
		t.Fatalf("err = %v, want bad input naming the file and a row group", err)
	}
}
