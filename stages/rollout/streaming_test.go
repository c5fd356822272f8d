package rollout

import (
	"encoding/json"
	"math"
	"runtime"
	"testing"

	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/conformance"
)

// sub returns rows lo..hi of a batch as their own record batch.
func sub(in Input, lo, hi int) Input {
	lens := make([]int, hi-lo)
	for i := range lens {
		a, b := in.Rows.Span(lo + i)
		lens[i] = b - a
	}
	t0, _ := in.Rows.Span(lo)
	_, t1 := in.Rows.Span(hi - 1)
	return Input{Rows: agg.NewRows(lens), Old: in.Old[t0:t1], Rollout: in.Rollout[t0:t1], Mask: in.Mask[t0:t1]}
}

// TestStreamingEqualsGolden runs every rollout_correction golden case of the
// assembled call as a stream of record batches of 1, 2 and 3 rows — first
// pass Observe over all of them, second pass Apply into one accumulator —
// and compares weights, mask and metrics with the one-shot golden values.
func TestStreamingEqualsGolden(t *testing.T) {
	f, err := conformance.Load("../../fixtures/conformance/rollout_correction.json")
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for i := range f.Cases {
		c := &f.Cases[i]
		if bad, _ := c.ExpectedError(); bad || string(c.Call["method"]) != `"rollout_correction"` {
			continue
		}
		rows, cols, err := inputs(c, "old_logprob", "rollout_logprob", "action_mask")
		if err != nil {
			t.Fatal(err)
		}
		corr, err := configOf(c.Args)
		if err != nil {
			t.Fatal(err)
		}
		var want struct {
			Weights json.RawMessage `json:"rollout_is_weights"`
			Mask    json.RawMessage `json:"action_mask"`
			Metrics json.RawMessage `json:"metrics"`
		}
		if err := json.Unmarshal(c.Expected, &want); err != nil {
			t.Fatal(err)
		}
		whole := Input{Rows: rows, Old: cols[0], Rollout: cols[1], Mask: cols[2]}
		for _, size := range []int{1, 2, 3} {
			chk := conformance.NewChecker(c)
			var parts []Input
			for lo := 0; lo < rows.N(); lo += size {
				parts = append(parts, sub(whole, lo, min(lo+size, rows.N())))
			}
			var n Norm
			if corr.NeedsFirstPass() {
				for _, p := range parts {
					if err := corr.Observe(&n, p); err != nil {
						t.Fatal(err)
					}
				}
			}
			var acc Acc
			var w, m [][]float64
			for _, p := range parts {
				pw, pm := make([]float64, p.Rows.Tokens()), make([]float64, p.Rows.Tokens())
				if err := corr.Apply(p, &n, pw, pm, &acc); err != nil {
					t.Fatal(err)
				}
				w, m = append(w, split(p.Rows, pw)...), append(m, split(p.Rows, pm)...)
			}
			met, err := corr.Metrics(&acc, &n)
			if err != nil {
				t.Fatal(err)
			}
			if corr.Weighted() {
				ww, err := conformance.Matrix(want.Weights)
				if err != nil {
					t.Fatal(err)
				}
				chk.Matrix("rollout_is_weights", w, ww)
			}
			wm, _ := conformance.Matrix(want.Mask)
			chk.Matrix("action_mask", m, wm)
			wmet, _ := conformance.Metrics(want.Metrics)
			chk.Metrics("metrics", met, wmet)
			for _, mm := range chk.Mismatches {
				t.Errorf("batches of %d rows: %v", size, mm)
			}
		}
		ran++
	}
	if ran != 17 {
		t.Errorf("ran %d cases, want 17", ran)
	}
}

// TestApplyInPlace: the mask output may be the input mask itself.
func TestApplyInPlace(t *testing.T) {
	cfg := Default()
	cfg.IS, cfg.RS, cfg.RSThreshold = "token", "token_k1,seq_max_k2", "0.9_1.1,0.01"
	corr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	in := synth(40, 33, 5)
	w, m, met, err := corr.Correct(in)
	if err != nil {
		t.Fatal(err)
	}
	own := append([]float64(nil), in.Mask...)
	in.Mask = own
	var acc Acc
	w2 := make([]float64, len(w))
	if err := corr.Apply(in, nil, w2, own, &acc); err != nil {
		t.Fatal(err)
	}
	met2, err := corr.Metrics(&acc, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range m {
		if m[i] != own[i] || w[i] != w2[i] {
			t.Fatalf("token %d: in place mask %v weight %v, want %v %v", i, own[i], w2[i], m[i], w[i])
		}
	}
	for k, v := range met {
		if met2[k] != v {
			t.Errorf("%s: in place %v, want %v", k, met2[k], v)
		}
	}
	if len(met) != len(met2) {
		t.Errorf("metric counts %d, %d", len(met), len(met2))
	}
}

// TestDeterministic: the same batch gives bit-identical weights, mask and
// metrics for any GOMAXPROCS (chunks are merged in a fixed order).
func TestDeterministic(t *testing.T) {
	cfg, err := Parse(map[string]any{"preset": "decoupled_geo_rs_token_tis", "rollout_is_batch_normalize": true})
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	in := synth(1000, 37, 9)
	var ref []float64
	var refMet map[string]float64
	for _, procs := range []int{1, 2, 7} {
		old := runtime.GOMAXPROCS(procs)
		w, m, met, err := c.Correct(in)
		runtime.GOMAXPROCS(old)
		if err != nil {
			t.Fatal(err)
		}
		got := append(w, m...)
		if ref == nil {
			ref, refMet = got, met
			continue
		}
		for i := range ref {
			if math.Float64bits(got[i]) != math.Float64bits(ref[i]) {
				t.Fatalf("GOMAXPROCS %d: output %d = %v, want %v", procs, i, got[i], ref[i])
			}
		}
		for k, v := range refMet {
			if math.Float64bits(met[k]) != math.Float64bits(v) {
				t.Errorf("GOMAXPROCS %d: %s = %v, want %v", procs, k, met[k], v)
			}
		}
	}
}

// TestPlainRowsExact: base's branch-free loops (finite, unclamped log
// ratios) give bit for bit the sums and e^ℓ of the select-then-multiply
// loop, and a row with a non-finite or clamped log ratio takes that loop.
func TestPlainRowsExact(t *testing.T) {
	in := synth(50, 64, 11)
	in.Old[3*64+60] = math.NaN()             // masked or not, row 3 is not plain
	in.Rollout[7*64+2] = in.Old[7*64+2] + 25 // row 7: a clamped ratio
	for b := 0; b < in.Rows.N(); b++ {
		lo, hi := in.Rows.Span(b)
		old, ro, m := in.Old[lo:hi], in.Rollout[lo:hi], in.Mask[lo:hi]
		n := hi - lo
		l, e, l2, e2 := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
		got, want := base(old, ro, m, l, e), baseExact(old, ro, m, l2, e2)
		if got.plain != (b != 3 && b != 7) {
			t.Errorf("row %d: plain %v", b, got.plain)
		}
		got.plain = false
		if got != want {
			t.Errorf("row %d: sums %+v, want %+v", b, got, want)
		}
		for i := range m {
			if m[i] != 0 && (math.Float64bits(e[i]) != math.Float64bits(e2[i]) || math.Float64bits(l[i]) != math.Float64bits(l2[i])) {
				t.Errorf("row %d token %d: ℓ %v e^ℓ %v, want %v %v", b, i, l[i], e[i], l2[i], e2[i])
			}
		}
	}
}
