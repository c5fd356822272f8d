package addstrategy

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/advantage"
)

func TestNames(t *testing.T) {
	want := []string{"correct_bias", "duplicate_informative", "grpo", "opmd", "reward_variance", "step_wise_grpo"}
	if got := Default().Names(); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// TestErrors: a bad name or argument is a bad-input error naming the add
// strategy family, not the advantage fns'.
func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		user map[string]any
		want string
	}{
		{"nosuch", nil, `unknown add strategy "nosuch" (valid: correct_bias, duplicate_informative, grpo, opmd, reward_variance, step_wise_grpo)`},
		{"grpo", map[string]any{"epsilonn": 1.0}, "add strategy grpo: unknown argument epsilonn"},
	} {
		_, err := New(Default(), tc.name, tc.user)
		if !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%q, %v): %v, want bad input with %q", tc.name, tc.user, err, tc.want)
		}
	}
}

// TestWrites checks how each strategy splits its output into writer calls.
func TestWrites(t *testing.T) {
	// Tasks a (runs 0, 1; run 0 has two steps) and b (one run).
	in := &advantage.Input{
		Reward: []float64{1, 0, 1, 0.5},
		Tasks:  advantage.GroupBy([]string{"a", "a", "a", "b"}),
		Runs:   advantage.GroupBy([]string{"a/0", "a/1", "a/0", "b/0"}),
	}
	tests := []struct {
		name string
		want [][]int32 // input rows of each write
	}{
		{"grpo", [][]int32{{0, 1, 2}, {3}}},
		{"step_wise_grpo", [][]int32{{0, 2}, {1}, {3}}},
		{"reward_variance", [][]int32{{0, 1, 2}}},
		{"duplicate_informative", [][]int32{{0, 1, 2, 0, 1, 2}}}, // a kept; one copy reaches 4 rows
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(Default(), tc.name, nil)
			if err != nil {
				t.Fatal(err)
			}
			p, err := s.Plan(in)
			if err != nil {
				t.Fatal(err)
			}
			var got [][]int32
			for _, w := range s.Writes(p, in) {
				var rows []int32
				for _, o := range w {
					rows = append(rows, o.Row)
				}
				got = append(got, rows)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("writes %v, want %v", got, tc.want)
			}
		})
	}
}

// TestDuplicateInformativeSeeded checks the refill rounds: the first pops
// the kept groups from the end, later ones are shuffles that depend only on
// the seed, each round shifting eid.task by the number of groups once more.
func TestDuplicateInformativeSeeded(t *testing.T) {
	tids := []string{"a", "a", "b", "b", "c", "c", "d", "d", "e", "e", "f", "f"}
	reward := []float64{0, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1} // a, b informative
	fn, err := New(Default(), "duplicate_informative", nil)
	if err != nil {
		t.Fatal(err)
	}
	plan := func(seed uint64) []advantage.Dup {
		p, err := fn.Plan(&advantage.Input{Reward: reward, Tasks: advantage.GroupBy(tids), Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		return p.Dups
	}
	orders := map[[2]int32]bool{}
	for seed := uint64(0); seed < 16; seed++ {
		d := plan(seed)
		if !reflect.DeepEqual(d, plan(seed)) {
			t.Fatalf("seed %d: two different plans", seed)
		}
		want := []advantage.Dup{{Group: 1, TaskOffset: 6}, {Group: 0, TaskOffset: 6}}
		if len(d) != 4 || !reflect.DeepEqual(d[:2], want) || d[2].TaskOffset != 12 || d[3].TaskOffset != 12 || d[2].Group == d[3].Group {
			t.Fatalf("seed %d: %+v", seed, d)
		}
		orders[[2]int32{d[2].Group, d[3].Group}] = true
	}
	if len(orders) != 2 {
		t.Errorf("second-round orders over 16 seeds: %v, want both", orders)
	}
}
