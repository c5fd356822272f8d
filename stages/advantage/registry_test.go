package advantage

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/schema"
)

func TestDefaultRegistry(t *testing.T) {
	want := []string{"asymre", "asymre_verl", "clipb", "clipv", "cod", "gdpo", "gigpo", "grpo", "grpo_verl", "invalid_reward_filter",
		"jsd", "on_policy_distill", "opmd", "opmd_verl", "ppo", "rec", "reinforce", "reinforceplusplus",
		"remax", "reward_std_filter", "rloo", "step_wise_grpo"}
	if got := Default().Names(); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	sides := map[string]Side{"grpo": PipelineSide, "jsd": TrainerSide, "clipv": TrainerSide, "rec": PipelineSide}
	for name, side := range sides {
		s, err := Default().Get(name)
		if err != nil || s.New.Side() != side {
			t.Errorf("%s: side %v (%v), want %v", name, s.New.Side(), err, side)
		}
	}
	if _, err := Default().With(grpoSpec()); err == nil {
		t.Error("registering grpo twice succeeded")
	}
	if Default() != Default() {
		t.Error("Default is rebuilt per call")
	}
}

func TestRegistryErrors(t *testing.T) {
	tests := []struct {
		name     string
		build    func() error
		contains []string
	}{
		{"unknown fn", func() error { _, err := Pipeline(Default(), "grpoo", nil); return err },
			[]string{`unknown advantage fn "grpoo"`, "grpo, grpo_verl"}},
		{"unknown arg", func() error {
			_, err := Pipeline(Default(), "grpo", map[string]any{"std_treshold": 0.1})
			return err
		}, []string{"advantage fn grpo", "unknown argument std_treshold", "std_threshold", "duplicate_experiences"}},
		{"arg of a fn without args", func() error {
			_, err := Pipeline(Default(), "reinforce", map[string]any{"x": 1})
			return err
		}, []string{"unknown argument x"}},
		{"bad enum", func() error {
			_, err := Pipeline(Default(), "grpo", map[string]any{"std_cal_level": "global"})
			return err
		}, []string{"std_cal_level", `"global"`, "group, batch"}},
		{"bad number", func() error {
			_, err := Pipeline(Default(), "grpo", map[string]any{"epsilon": "tiny"})
			return err
		}, []string{"epsilon", "not a valid float"}},
		{"bad bool", func() error {
			_, err := Pipeline(Default(), "grpo", map[string]any{"duplicate_experiences": 1})
			return err
		}, []string{"duplicate_experiences", "not a valid bool"}},
		{"trainer fn in the pipeline", func() error { _, err := Pipeline(Default(), "ppo", nil); return err },
			[]string{"AdvantageFn ppo can only be computed in the trainer"}},
		{"pipeline fn in the trainer", func() error { _, err := Trainer(Default(), "grpo", nil); return err },
			[]string{"grpo runs in the pipeline"}},
		{"bad opmd baseline (Q-30)", func() error {
			_, err := Pipeline(Default(), "opmd", map[string]any{"opmd_baseline": "max"})
			return err
		}, []string{"mean, logavgexp"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.build()
			if !errors.Is(err, schema.ErrBadInput) {
				t.Fatalf("got %v, want a bad-input error", err)
			}
			for _, s := range tc.contains {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("%q does not mention %q", err, s)
				}
			}
		})
	}
}

// TestResolve checks upstream's two layers of defaults: no dict gives
// default_args(), a dict falls back to the constructor defaults (Q-13: clipv
// mu 8.5 vs 2.0), and opt-in fixes are not part of default_args().
func TestResolve(t *testing.T) {
	tests := []struct {
		name string
		fn   string
		user map[string]any
		want map[string]any
	}{
		{"no dict: default_args", "clipv", nil, map[string]any{"mu": 8.5, "epsilon": 1e-6, "max_frac": 1e-4}},
		{"partial dict: constructor defaults", "clipv", map[string]any{"epsilon": 1e-3}, map[string]any{"mu": 2.0, "epsilon": 1e-3}},
		{"null threshold", "grpo", nil, map[string]any{"std_threshold": nil, "dr_grpo": false, "singleton_group_policy": "upstream"}},
		{"integer for a float", "grpo", map[string]any{"std_threshold": int64(0)}, map[string]any{"std_threshold": 0.0}},
		{"rec drop null", "rec", map[string]any{"drop": nil}, map[string]any{"drop": nil}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Default().Get(tc.fn)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Resolve(tc.fn, s.Params, tc.user)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s: got %v (%T), want %v", k, got[k], got[k], v)
				}
			}
		})
	}
	if _, ok := mustSpec(t, "grpo").Defaults()["rank_penalty_adjusted_score"]; ok {
		t.Error("an opt-in fix is part of default_args()")
	}
}

func mustSpec(t *testing.T, name string) Spec {
	t.Helper()
	s, err := Default().Get(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSpecDefaults checks that every registered fn builds with its defaults.
func TestSpecDefaults(t *testing.T) {
	for _, name := range Default().Names() {
		s, _ := Default().Get(name)
		var err error
		if s.New.Side() == PipelineSide {
			_, err = Pipeline(Default(), name, s.Defaults())
		} else {
			_, err = Trainer(Default(), name, s.Defaults())
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
