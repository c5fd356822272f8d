package main

import (
	"encoding/json"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// specFlags reads name → [use_critic, use_reference,
// compute_advantage_in_trainer, can_balance_batch, schema] from the copy of
// the spec's algorithm table kept beside the algorithm package.
func specFlags(t *testing.T) map[string][5]any {
	t.Helper()
	b, err := os.ReadFile("../../pipeline/algorithm/testdata/spec_table.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][5]any{}
	for _, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 9 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		c := func(i int) string { return strings.Trim(strings.TrimSpace(cells[i]), "*") }
		out[strings.Trim(c(1), "`")] = [5]any{c(3) == "T", c(4) == "T", c(5) == "T", c(6) == "T", c(7)}
	}
	return out
}

func TestAlgorithmsJSONMatchesSpec(t *testing.T) {
	stdout, stderr, code := runCLI(t, "algorithms", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var docs []map[string]json.RawMessage
	if err := json.Unmarshal([]byte(stdout), &docs); err != nil {
		t.Fatal(err)
	}
	spec := specFlags(t)
	if len(docs) != len(spec) || len(spec) != 24 {
		t.Fatalf("%d algorithms listed, spec table has %d", len(docs), len(spec))
	}
	for _, d := range docs {
		var keys []string
		for k := range d {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		want := []string{"can_balance_batch", "compute_advantage_in_trainer", "default_config", "name", "schema", "use_critic", "use_reference"}
		var name string
		json.Unmarshal(d["name"], &name)
		if name == "mix" || name == "mix_chord" {
			want = append(want, "use_rollout")
			sort.Strings(want)
		}
		if !reflect.DeepEqual(keys, want) {
			t.Errorf("%s: keys %v, want %v", name, keys, want)
		}
		var got [5]any
		for i, k := range []string{"use_critic", "use_reference", "compute_advantage_in_trainer", "can_balance_batch"} {
			var v bool
			if err := json.Unmarshal(d[k], &v); err != nil {
				t.Fatalf("%s.%s: %v", name, k, err)
			}
			got[i] = v
		}
		var s string
		json.Unmarshal(d["schema"], &s)
		got[4] = s
		if want, ok := spec[name]; !ok || got != want {
			t.Errorf("%s: flags %v, spec %v", name, got, want)
		}
		var cfg map[string]any
		if err := json.Unmarshal(d["default_config"], &cfg); err != nil {
			t.Fatalf("%s default_config: %v", name, err)
		}
		if cfg["algorithm_type"] != name || cfg["policy_loss_fn_args"] == nil || cfg["loss_agg_mode"] != "token-mean" {
			t.Errorf("%s: default_config not resolved: %v", name, cfg)
		}
	}
}

func TestAlgorithmsCommand(t *testing.T) {
	tests := []struct {
		args     []string
		code     int
		contains []string
	}{
		{[]string{"algorithms"}, 0, []string{"NAME", "grpo_verl", "multi_step_grpo", "step_wise_grpo"}},
		{[]string{"algorithms", "dpo"}, 0, []string{"DPOAlgorithm", "can_balance_batch             false", "repeat_times                2", `k2 {"adaptive":false,"kl_coef":0.001}`}},
		{[]string{"algorithms", "grpo", "--format", "json"}, 0, []string{`"name": "grpo"`, `"advantage_fn": "grpo"`}},
		{[]string{"algorithms", "grpoo"}, 2, []string{`unknown algorithm type "grpoo"`}},
		{[]string{"algorithms", "--format", "yaml"}, 2, []string{"--format"}},
		{[]string{"algorithms", "a", "b"}, 2, []string{"at most one"}},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			stdout, stderr, code := runCLI(t, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d: %s", code, tc.code, stderr)
			}
			for _, s := range tc.contains {
				if !strings.Contains(stdout+stderr, s) {
					t.Errorf("output lacks %q:\n%s%s", s, stdout, stderr)
				}
			}
		})
	}
}
