package synth

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
)

// TestAgentColumns checks --info and --reward-components: the other columns
// keep their values; every row's info has an anchor state shared by the
// first steps of a task's runs and a step reward in {0, 0.5, 1}; the reward
// is the sum of its 0/1 components; the same config gives the same values.
func TestAgentColumns(t *testing.T) {
	c := small()
	c.Kind, c.Steps = Multi, 3
	base := collect(t, c)
	c.Info, c.RewardComponents = true, []string{"correct", "format"}
	got := collect(t, c)
	if again := collect(t, c); !slicesEqual(again["info"], got["info"]) || !slicesEqual(again["reward_format"], got["reward_format"]) {
		t.Error("not deterministic")
	}
	for name, rows := range base {
		if name != "reward" && !slicesEqual(rows, got[name]) {
			t.Errorf("column %s changed by the agent columns", name)
		}
	}
	first := map[[2]int64]string{} // batch/task → state of step 0
	states := map[string]bool{}
	for i := range got["info"] {
		var info struct {
			Hash       string   `json:"env_state_hash"`
			StepReward *float64 `json:"step_reward"`
		}
		if err := json.Unmarshal([]byte(got["info"][i].(string)), &info); err != nil || len(info.Hash) != 16 || info.StepReward == nil {
			t.Fatalf("row %d: info %v (%v)", i, got["info"][i], err)
		}
		if r := *info.StepReward; r != 0 && r != 0.5 && r != 1 {
			t.Errorf("row %d: step_reward %v", i, r)
		}
		states[info.Hash] = true
		if got["step"][i].(int64) == 0 {
			key := [2]int64{got["batch"][i].(int64), got["task"][i].(int64)}
			if h, ok := first[key]; ok && h != info.Hash {
				t.Errorf("row %d: first step of task %v in state %s and %s", i, key, h, info.Hash)
			}
			first[key] = info.Hash
		}
		a, b := got["reward_correct"][i].(float64), got["reward_format"][i].(float64)
		if (a != 0 && a != 1) || (b != 0 && b != 1) || got["reward"][i].(float64) != a+b {
			t.Errorf("row %d: reward %v from components %v, %v", i, got["reward"][i], a, b)
		}
	}
	// 12 tasks: one initial state each, at most two per later step.
	if n := len(states); n <= 12 || n > 12*5 {
		t.Errorf("%d distinct states", n)
	}
	for _, bad := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.RewardComponents = []string{"a", "a"} }, `reward component "a"`},
		{func(c *Config) { c.RewardComponents = []string{"Bad-name"} }, `reward component "Bad-name"`},
		{func(c *Config) { c.Kind, c.Runs, c.Steps, c.Info = Pairs, 2, 1, true }, "kind pairs has no rewards"},
	} {
		cfg := small()
		bad.edit(&cfg)
		err := Generate(context.Background(), cfg, func(arrow.Record) error { return nil })
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("error %v, want %q", err, bad.want)
		}
	}
}
