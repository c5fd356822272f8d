package synth

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"

	"github.com/rftpipe/rftpipe/schema"
)

// collect generates a store and returns each column's rows as Go values:
// lists as []float64 / []int64 / []bool, scalars as float64 / int64 / bool.
func collect(t *testing.T, c Config) map[string][]any {
	t.Helper()
	out := map[string][]any{}
	err := Generate(context.Background(), c, func(rec arrow.Record) error {
		if err := schema.Validate("synth", 0, rec, schema.ValidateOptions{}); err != nil {
			return err
		}
		for k, f := range rec.Schema().Fields() {
			col := rec.Column(k)
			for i := 0; i < col.Len(); i++ {
				out[f.Name] = append(out[f.Name], value(col, i))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func value(a arrow.Array, i int) any {
	switch a := a.(type) {
	case *array.List:
		lo, hi := a.ValueOffsets(i)
		v := array.NewSlice(a.ListValues(), lo, hi)
		defer v.Release()
		var xs []any
		for k := 0; k < v.Len(); k++ {
			xs = append(xs, value(v, k))
		}
		return xs
	case *array.Float32:
		return float64(a.Value(i))
	case *array.Float64:
		return a.Value(i)
	case *array.Int32:
		return int64(a.Value(i))
	case *array.Int64:
		return a.Value(i)
	case *array.Boolean:
		return a.Value(i)
	case *array.String:
		if a.IsNull(i) {
			return nil
		}
		return a.Value(i)
	}
	return a.ValueStr(i)
}

func floats(v any) []float64 {
	var out []float64
	for _, x := range v.([]any) {
		out = append(out, x.(float64))
	}
	return out
}

func small() Config {
	c := Default()
	c.Tasks, c.Runs, c.TasksPerBatch, c.PromptLen, c.RespMin, c.RespMax, c.Seed = 12, 4, 5, 6, 3, 20, 9
	c.ChunkRows = 7 // several chunks
	return c
}

// TestWithColumns checks the trainer-side columns: present for every row,
// as long as the response, in range, zero off the action mask, near the
// rollout log-probs but not equal, and the base columns unchanged by them.
func TestWithColumns(t *testing.T) {
	for _, kind := range []Kind{Single, Multi} {
		t.Run(string(kind), func(t *testing.T) {
			c := small()
			c.Kind = kind
			base := collect(t, c)
			c.With = canonical(TrainerColumns)
			got := collect(t, c)
			for name, rows := range base {
				if !slicesEqual(rows, got[name]) {
					t.Errorf("column %s changed by --with", name)
				}
			}
			experts := 0
			var moved, ratio float64
			for i := range got[schema.Logprobs] {
				lps, mask := floats(got[schema.Logprobs][i]), got[schema.ActionMask][i].([]any)
				if got[schema.ExpertMask][i].(bool) {
					experts++
				}
				for _, name := range c.With {
					if name == schema.ExpertMask {
						continue
					}
					vals := floats(got[name][i])
					if len(vals) != len(lps) {
						t.Fatalf("row %d: %s has %d values, logprobs %d", i, name, len(vals), len(lps))
					}
					for k, v := range vals {
						switch {
						case !mask[k].(bool) && v != 0:
							t.Errorf("row %d: %s[%d] = %g off the action mask", i, name, k, v)
						case math.IsNaN(v) || math.IsInf(v, 0):
							t.Errorf("row %d: %s[%d] = %g", i, name, k, v)
						case name == schema.Entropy && v < 0:
							t.Errorf("row %d: entropy %g < 0", i, v)
						case strings.HasSuffix(name, "logprob") || name == schema.TeacherLogprobs:
							if v > 0 {
								t.Errorf("row %d: %s %g > 0", i, name, v)
							}
						}
					}
				}
				for k, a := range floats(got[schema.Advantages][i]) {
					if want := got[schema.Reward][i].(float64) - 0.5; mask[k].(bool) && a != want {
						t.Errorf("row %d: advantage %g, want reward - 0.5 = %g", i, a, want)
					}
				}
				old, cur := floats(got[schema.OldLogprob][i]), floats(got[schema.Logprob][i])
				for k := range lps {
					if mask[k].(bool) {
						moved = max(moved, math.Abs(old[k]-lps[k]))
						ratio = max(ratio, math.Abs(cur[k]-old[k]))
					}
				}
			}
			if moved == 0 || moved > 0.1 || ratio == 0 || ratio > 0.2 {
				t.Errorf("old_logprob moves up to %g from logprobs, logprob up to %g from old_logprob: want small, non-zero", moved, ratio)
			}
			if n := len(got[schema.ExpertMask]); experts == 0 || experts == n {
				t.Errorf("%d of %d rows are expert rows", experts, n)
			}
		})
	}
}

// TestPairs checks the trainer's DPO rows: adjacent chosen/rejected rows of
// one prompt, chosen gaining log-probability against the reference.
func TestPairs(t *testing.T) {
	c := small()
	c.Kind, c.Runs, c.With = Pairs, 2, []string{schema.Logprob, schema.RefLogprob}
	got := collect(t, c)
	if n := len(got[schema.Run]); n != 2*c.Tasks {
		t.Fatalf("%d rows, want %d", n, 2*c.Tasks)
	}
	margin := func(i int) float64 {
		var s float64
		lp, ref := floats(got[schema.Logprob][i]), floats(got[schema.RefLogprob][i])
		for k := range lp {
			s += lp[k] - ref[k]
		}
		return s
	}
	var pos int
	for i := 0; i < len(got[schema.Run]); i += 2 {
		if got[schema.Run][i] != int64(0) || got[schema.Run][i+1] != int64(1) ||
			got[schema.Task][i] != got[schema.Task][i+1] || got[schema.Batch][i] != got[schema.Batch][i+1] {
			t.Fatalf("rows %d, %d are not one pair", i, i+1)
		}
		a, b := got[schema.Tokens][i].([]any), got[schema.Tokens][i+1].([]any)
		if !slicesEqual(a[:c.PromptLen], b[:c.PromptLen]) {
			t.Errorf("pair %d: prompts differ", i/2)
		}
		if margin(i) > margin(i+1) {
			pos++
		}
	}
	if pos < c.Tasks*3/4 {
		t.Errorf("chosen beats rejected in %d of %d pairs", pos, c.Tasks)
	}
}

// TestDeterministic checks that a config gives the same rows on every run.
func TestDeterministic(t *testing.T) {
	c := small()
	c.With = canonical(TrainerColumns)
	a, b := collect(t, c), collect(t, c)
	for name := range a {
		if !slicesEqual(a[name], b[name]) {
			t.Errorf("column %s differs between runs", name)
		}
	}
}

func TestBadConfigs(t *testing.T) {
	for _, c := range []struct {
		with string
		edit func(*Config)
		want string
	}{
		{"logprob,bogus", nil, `unknown column "bogus"`},
		{"logprob", func(c *Config) { c.Kind = DPO }, "use kind pairs"},
		{"", func(c *Config) { c.Kind, c.Runs = Pairs, 3 }, "a pair is 2 runs of 1 step"},
		{"", func(c *Config) { c.Kind = "triples" }, `unknown kind "triples" (valid: single, multi, dpo, pairs)`},
	} {
		cfg := small()
		with, err := ParseWith(c.with)
		if err == nil {
			cfg.With = with
			if c.edit != nil {
				c.edit(&cfg)
			}
			err = Generate(context.Background(), cfg, func(arrow.Record) error { return nil })
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.with, err, c.want)
		}
	}
	got, err := ParseWith("expert_mask, logprob,logprob")
	if err != nil || !slices.Equal(got, []string{schema.Logprob, schema.ExpertMask}) {
		t.Errorf("ParseWith: %v, %v", got, err)
	}
}

func slicesEqual(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, xl := a[i].([]any)
		y, yl := b[i].([]any)
		if xl != yl || (xl && !slicesEqual(x, y)) || (!xl && a[i] != b[i]) {
			return false
		}
	}
	return true
}
