package advantage

import (
	"math"
	"reflect"
	"testing"
)

// TestRefillGroups checks grpo's seeded duplication: one copy of a kept group
// per dropped group, reproducible for a seed.
func TestRefillGroups(t *testing.T) {
	// Groups a..f with two rows each; b, d, e have equal rewards (std 0).
	tids := []string{"a", "a", "b", "b", "c", "c", "d", "d", "e", "e", "f", "f"}
	reward := []float64{0, 1, 1, 1, 0, 1, 0, 0, 1, 1, 1, 0}
	tests := []struct {
		name     string
		reward   []float64
		wantDups int
	}{
		{"three dropped", reward, 3},
		{"none dropped", []float64{0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1}, 0},
		{"all dropped", make([]float64, 12), 0},
	}
	zero := 0.0
	fn := &GRPO{Epsilon: 1e-6, StdThreshold: &zero, Duplicate: true}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var first *Plan
			for _, seed := range []uint64{7, 7} {
				in := input(tids, tc.reward)
				in.Seed = seed
				p, err := fn.Plan(in)
				if err != nil {
					t.Fatal(err)
				}
				if len(p.Dups) != tc.wantDups {
					t.Fatalf("%d duplicate blocks, want %d", len(p.Dups), tc.wantDups)
				}
				for _, d := range p.Dups {
					if !p.Keep[p.Groups.Group(int(d.Group))[0]] || d.TaskOffset != 0 {
						t.Errorf("duplicate %+v copies a dropped group or shifts tasks", d)
					}
				}
				if first != nil && !reflect.DeepEqual(first, p) {
					t.Errorf("same seed, different plans")
				}
				first = p
			}
			if out := first.Output(); len(out) != len(tids)-first.Filtered+2*len(first.Dups) {
				t.Errorf("%d output rows", len(out))
			}
		})
	}
	// Without a threshold, duplication is not honoured (upstream).
	p, err := (&GRPO{Epsilon: 1e-6, Duplicate: true}).Plan(input(tids, reward))
	if err != nil || len(p.Dups) != 0 {
		t.Errorf("duplication without std_threshold: %v, %v", p.Dups, err)
	}
}

// TestRefillRows checks the old duplicate_informative refill on the spec's
// example (4 groups of 4, effective [A, B] → A, B, B', A') and a later,
// shuffled round.
func TestRefillRows(t *testing.T) {
	tests := []struct {
		name    string
		tids    []string
		keep    []string // groups kept by the filter
		total   int
		want    []Dup
		shuffle bool
	}{
		{"first round pops from the end", rep("ABCD", 4), []string{"A", "B"}, 16,
			[]Dup{{Group: 1, TaskOffset: 4}, {Group: 0, TaskOffset: 4}}, false},
		{"second round shifts twice", rep("ABCD", 4), []string{"C"}, 16,
			[]Dup{{Group: 2, TaskOffset: 4}, {Group: 2, TaskOffset: 8}, {Group: 2, TaskOffset: 12}}, true},
		{"nothing kept", rep("AB", 2), nil, 4, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newPlan(input(tc.tids, make([]float64, len(tc.tids))), false)
			for i, k := range tc.tids {
				for _, g := range tc.keep {
					p.Keep[i] = p.Keep[i] || k == g
				}
			}
			RefillRows(p, tc.total, NewRNG(3))
			if !reflect.DeepEqual(p.Dups, tc.want) {
				t.Errorf("got %+v, want %+v", p.Dups, tc.want)
			}
		})
	}
}

// rep returns each key of keys repeated n times, key by key.
func rep(keys string, n int) []string {
	var out []string
	for _, k := range keys {
		for i := 0; i < n; i++ {
			out = append(out, string(k))
		}
	}
	return out
}

func TestFilters(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name     string
		fn       string
		args     map[string]any
		tids     []string
		reward   []float64
		keep     []bool
		filtered int
	}{
		{"reward_std_filter drops singletons and flat groups", "reward_std_filter", nil,
			[]string{"a", "b", "b", "c", "c"}, []float64{1, 1, 1, 0, 1}, []bool{false, false, false, true, true}, 3},
		// population std of {0, 1} is 0.5: dropped at 0.5, kept at 0.49.
		{"reward_std_filter threshold is inclusive", "reward_std_filter", map[string]any{"threshold": 0.5},
			[]string{"a", "a"}, []float64{0, 1}, []bool{false, false}, 2},
		{"reward_std_filter uses the population std", "reward_std_filter", map[string]any{"threshold": 0.49},
			[]string{"a", "a"}, []float64{0, 1}, []bool{true, true}, 0},
		{"invalid_reward_filter drops NaN", "invalid_reward_filter", nil,
			[]string{"a", "a", "b"}, []float64{nan, 1, math.Inf(1)}, []bool{false, true, true}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fn, err := Pipeline(Default(), tc.fn, tc.args)
			if err != nil {
				t.Fatal(err)
			}
			p, err := fn.Plan(input(tc.tids, tc.reward))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(p.Keep, tc.keep) || p.Filtered != tc.filtered || p.Metrics["filtered_count"] != float64(tc.filtered) {
				t.Errorf("keep %v filtered %d %v, want %v %d", p.Keep, p.Filtered, p.Metrics, tc.keep, tc.filtered)
			}
			if p.Score != nil {
				t.Error("a filter computed scores")
			}
		})
	}
}

// TestEmptyInput checks the empty-batch results of the pipeline-side fns.
func TestEmptyInput(t *testing.T) {
	tests := []struct {
		fn      string
		metrics map[string]float64
	}{
		{"grpo", map[string]float64{"filtered_count": 0}},
		{"step_wise_grpo", map[string]float64{}},
		{"opmd", map[string]float64{}},
		{"rec", map[string]float64{}},
		{"reward_std_filter", map[string]float64{"filtered_count": 0}},
	}
	for _, tc := range tests {
		t.Run(tc.fn, func(t *testing.T) {
			fn, err := Pipeline(Default(), tc.fn, nil)
			if err != nil {
				t.Fatal(err)
			}
			p, err := fn.Plan(&Input{}) // no rows, zero grouping
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Output()) != 0 || !reflect.DeepEqual(map[string]float64(p.Metrics), tc.metrics) {
				t.Errorf("output %v metrics %v, want none and %v", p.Output(), p.Metrics, tc.metrics)
			}
		})
	}
}

func TestBroadcast(t *testing.T) {
	tests := []struct {
		name  string
		score float32
		mask  []bool
		want  []float32
	}{
		{"positive", 0.5, []bool{true, false, true}, []float32{0.5, 0, 0.5}},
		{"negative gives -0 under the mask", -2, []bool{false, true}, []float32{float32(math.Copysign(0, -1)), -2}},
		{"empty", 1, nil, []float32{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dst := make([]float32, len(tc.mask))
			Broadcast(dst, tc.score, tc.mask)
			for i := range dst {
				if math.Float32bits(dst[i]) != math.Float32bits(tc.want[i]) {
					t.Errorf("dst[%d] = %v, want %v", i, dst[i], tc.want[i])
				}
			}
		})
	}
}
