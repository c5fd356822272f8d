package pipeline

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/stages/advantage"
	"github.com/rftpipe/rftpipe/stages/conformance"
)

// writeGolden writes the experiences of a golden advantage case as a store:
// ids as strings, info as JSON text, reward components as reward_<k>.
func writeGolden(t *testing.T, path string, exps []advantage.GoldenExperience) {
	t.Helper()
	k := 0
	for _, e := range exps {
		k = max(k, len(e.RewardComponents))
	}
	str := arrow.BinaryTypes.String
	fields := []arrow.Field{{Name: schema.Batch, Type: str}, {Name: schema.Task, Type: str},
		schema.Field(schema.Run), schema.Field(schema.Step), schema.Field(schema.Suffix), schema.Field(schema.Reward),
		schema.Field(schema.ActionMask), schema.Field(schema.Info)}
	for c := 0; c < k; c++ {
		fields = append(fields, arrow.Field{Name: fmt.Sprintf("reward_%d", c), Type: arrow.PrimitiveTypes.Float64, Nullable: true})
	}
	sc := arrow.NewSchema(fields, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for i, e := range exps {
		b.Field(0).(*array.StringBuilder).Append(string(e.EID.Batch))
		b.Field(1).(*array.StringBuilder).Append(string(e.EID.Task))
		b.Field(2).(*array.Int32Builder).Append(int32(e.EID.Run))
		b.Field(3).(*array.Int32Builder).Append(int32(e.EID.Step))
		b.Field(4).(*array.StringBuilder).Append(strconv.Itoa(i))
		if e.Reward != nil {
			b.Field(5).(*array.Float64Builder).Append(float64(*e.Reward))
		} else {
			b.Field(5).AppendNull()
		}
		m := b.Field(6).(*array.ListBuilder)
		m.Append(true)
		for _, x := range e.ActionMask {
			m.ValueBuilder().(*array.BooleanBuilder).Append(x != 0)
		}
		if e.Info != nil {
			info := "{"
			first := true
			for key, v := range e.Info {
				if !first {
					info += ","
				}
				first = false
				info += strconv.Quote(key) + ":" + string(v)
			}
			b.Field(7).(*array.StringBuilder).Append(info + "}")
		} else {
			b.Field(7).AppendNull()
		}
		for c := 0; c < k; c++ {
			b.Field(8 + c).(*array.Float64Builder).Append(float64(e.RewardComponents[c]))
		}
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

// TestFns06ThroughTheEngine: every golden case of gigpo, gdpo and cod run
// through the engine — the group pass reads info (step rewards, anchor
// states, CoD's fields) and the reward_<name> columns from the store — writes
// the advantages and returns of the fn's plan over the golden input (which
// the conformance vectors check), in input order without the dropped rows,
// and the same whether the store is read in record batches of 7 rows or as
// one batch.
func TestFns06ThroughTheEngine(t *testing.T) {
	f, err := conformance.Load("../fixtures/conformance/advantage.json")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range f.Cases {
		c := &f.Cases[i]
		if c.Fn != "gigpo" && c.Fn != "gdpo" && c.Fn != "cod" {
			continue
		}
		if wantErr, _ := c.ExpectedError(); wantErr {
			continue
		}
		n++
		t.Run(c.Name, func(t *testing.T) {
			exps, err := advantage.DecodeGolden(c)
			if err != nil {
				t.Fatal(err)
			}
			user, err := advantage.GoldenArgs(c)
			if err != nil {
				t.Fatal(err)
			}
			fn, err := advantage.Pipeline(advantage.Default(), c.Fn, user)
			if err != nil {
				t.Fatal(err)
			}
			in := advantage.GoldenInput(exps, 0)
			if err := advantage.GoldenNeeds(in, exps, advantage.NeedsOf(fn)); err != nil {
				t.Fatal(err)
			}
			plan, err := fn.Plan(in)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			src := filepath.Join(dir, "in.parquet")
			writeGolden(t, src, exps)
			out := func(rows int, ext string) *table {
				fn, err := advantage.Pipeline(advantage.Default(), c.Fn, user)
				if err != nil {
					t.Fatal(err)
				}
				path := filepath.Join(dir, strconv.Itoa(rows)+ext)
				run(t, Job{In: src, Out: path, BatchRows: rows, Stages: PipelineSide(c.Fn, fn)})
				return readTable(t, path)
			}
			whole, parts := out(1<<20, ".parquet"), out(7, ".arrow")
			var kept []int
			for r, k := range plan.Keep {
				if k {
					kept = append(kept, r)
				}
			}
			for _, got := range []*table{whole, parts} {
				if len(got.adv) != len(kept) {
					t.Fatalf("%d rows written, the plan keeps %d", len(got.adv), len(kept))
				}
				for i, r := range kept {
					if got.suffix[i] != strconv.Itoa(r) {
						t.Fatalf("output row %d is input row %s, want %d (input order)", i, got.suffix[i], r)
					}
					ret := plan.Score[r]
					if plan.Return != nil {
						ret = plan.Return[r]
					}
					for k, m := range exps[r].ActionMask {
						wa, wr := float64(plan.Score[r])*m, float64(ret)*m
						if a, b := float64(got.adv[i][k]), float64(got.ret[i][k]); math.Abs(a-wa) > 1e-6 || math.Abs(b-wr) > 1e-6 {
							t.Fatalf("row %d token %d: advantage %v return %v, want %v and %v", r, k, a, b, wa, wr)
						}
					}
				}
			}
		})
	}
	if n != 25 {
		t.Fatalf("%d cases of gigpo, gdpo and cod; want 25", n)
	}
}

// TestGiGPOWithoutInfo: a store without the info column runs gigpo as if no
// row had a step reward or an anchor state: each run's return is its last
// reward, A_S = 0, so with fnorm none a row's advantage is its reward minus
// its task's mean, over 1 + epsilon, in float32.
func TestGiGPOWithoutInfo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "in.parquet")
	rows := append(group(0, 1.0, 0.0, 0.5), group(1, 0.25, 0.75)...)
	writeExps(t, path, rows)
	out := filepath.Join(t.TempDir(), "out.parquet")
	run(t, withFn(t, Job{In: path, Out: out}, "gigpo", ""))
	got := readTable(t, out)
	mean := map[int64]float32{0: 0.5, 1: 0.5}
	for i, r := range rows {
		want := (float32(r.reward.(float64)) - mean[r.task]) / float32(1+1e-6)
		if got.adv[i][0] != want || got.adv[i][1] != want*0 {
			t.Fatalf("row %d: advantages %v, want %v at masked-in tokens", i, got.adv[i], want)
		}
	}
}
