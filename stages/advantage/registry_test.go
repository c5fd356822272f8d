package advantage

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/schema"
)

func TestDefaultRegistry(t *testing.T) {
	want := []string{"asymre", "asymre_verl", "clipb", "clipv", "grpo", "grpo_verl", "invalid_reward_filter",
		"jsd", "on_policy_distill", "opmd", "opmd_verl", "ppo", "rec", "reinforce", "reinforceplusplus",
		"remax", "reward_std_filter", "rloo", "step_wise_grpo"}
	if got := Default().Names(); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	sides := map[string]Side{"grpo": PipelineSide, "jsd": TrainerSide, "clipv": TrainerSide, "rec": PipelineSide}
	for name, side := range sides {
		s, err := Default().Get(name)
		if err != nil || s.Side() != side {
			t.Errorf("%s: side %v (%v), want %v", name, s.Side(), err, side)
		}
	}
	if err := Default().Add(Spec{Name: "grpo", NewPipeline: grpoSpec().NewPipeline}); err == nil {
		t.Error("registering grpo twice succeeded")
	}
	if err := NewRegistry().Add(Spec{Name: "x"}); err == nil {
		t.Error("a spec without constructor was accepted")
	}
}

func TestRegistryErrors(t *testing.T) {
	tests := []struct {
		name     string
		build    func() error
		contains []string
	}{
		{"unknown fn", func() error { _, err := Default().Pipeline("grpoo", nil); return err },
			[]string{`unknown advantage fn "grpoo"`, "grpo, grpo_verl"}},
		{"unknown arg", func() error {
			_, err := Default().Pipeline("grpo", map[string]any{"std_treshold": 0.1})
			return err
		}, []string{`unknown arg "std_treshold"`, "std_threshold", "duplicate_experiences"}},
		{"arg of a fn without args", func() error {
			_, err := Default().Pipeline("reinforce", map[string]any{"x": 1})
			return err
		}, []string{"takes no args"}},
		{"bad enum", func() error {
			_, err := Default().Pipeline("grpo", map[string]any{"std_cal_level": "global"})
			return err
		}, []string{"std_cal_level", "group|batch"}},
		{"bad number", func() error {
			_, err := Default().Pipeline("grpo", map[string]any{"epsilon": "tiny"})
			return err
		}, []string{"epsilon", "not a number"}},
		{"bad bool", func() error {
			_, err := Default().Pipeline("grpo", map[string]any{"duplicate_experiences": 1})
			return err
		}, []string{"duplicate_experiences", "boolean"}},
		{"trainer fn in the pipeline", func() error { _, err := Default().Pipeline("ppo", nil); return err },
			[]string{"AdvantageFn ppo can only be computed in the trainer"}},
		{"pipeline fn in the trainer", func() error { _, err := Default().Trainer("grpo", nil); return err },
			[]string{"grpo runs in the pipeline"}},
		{"bad opmd baseline (Q-30)", func() error {
			_, err := Default().Pipeline("opmd", map[string]any{"opmd_baseline": "max"})
			return err
		}, []string{"mean|logavgexp"}},
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

func TestResolve(t *testing.T) {
	tests := []struct {
		name string
		user map[string]any
		want Args
	}{
		{"defaults", nil, Args{"epsilon": 1e-6, "std_threshold": nil, "std_cal_level": "group"}},
		{"typed values", map[string]any{"epsilon": 1e-3, "std_threshold": 0, "std_cal_level": "batch"},
			Args{"epsilon": 1e-3, "std_threshold": 0.0, "std_cal_level": "batch"}},
		{"command-line strings", map[string]any{"epsilon": "1e-3", "std_threshold": "0.5"},
			Args{"epsilon": 1e-3, "std_threshold": 0.5, "std_cal_level": "group"}},
		{"explicit null", map[string]any{"std_threshold": "null"},
			Args{"epsilon": 1e-6, "std_threshold": nil, "std_cal_level": "group"}},
	}
	params := []Param{paramEpsilon, paramStdThreshold, paramStdCal}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Resolve("test", params, tc.user)
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
}

// TestSpecDefaults checks that every registered fn builds with its defaults.
func TestSpecDefaults(t *testing.T) {
	for _, name := range Default().Names() {
		s, _ := Default().Get(name)
		var err error
		if s.Side() == PipelineSide {
			_, err = Default().Pipeline(name, s.Defaults())
		} else {
			_, err = Default().Trainer(name, s.Defaults())
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
