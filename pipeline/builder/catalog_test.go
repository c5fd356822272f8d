package builder

import (
	"slices"
	"testing"
)

// TestFamiliesOneShape: every family is reached the same way, its entries
// named as its names, sorted, and a documented family documents each entry.
func TestFamiliesOneShape(t *testing.T) {
	for _, c := range []struct {
		f          Family
		name       string
		documented bool
		has        string
	}{
		{AdvantageFns, "advantage fns", true, "grpo"},
		{AddStrategies, "add strategies", true, "duplicate_informative"},
		{PolicyLosses, "policy losses", false, "ppo"},
		{KLFns, "KL functions", false, "k3"},
		{EntropyFns, "entropy functions", false, "mix"},
		{RolloutOptions, "rollout options", false, "seq_max_k3"},
		{SampleStrategies, "sample strategies", true, "staleness_control"},
		{Algorithms, "algorithm presets", true, "rloo"},
		{Operators, "experience operators", true, "dapo_dynamic_sampling"},
		{ConformanceKinds, "conformance kinds", true, "rollout_correction"},
	} {
		es, names := Entries(c.f), Names(c.f)
		got := make([]string, len(es))
		for i, e := range es {
			got[i] = e.Name
			if c.documented && e.Doc == "" {
				t.Errorf("%s: %s has no doc", c.name, e.Name)
			}
		}
		if !slices.Equal(got, names) || !slices.IsSorted(names) || !slices.Contains(names, c.has) {
			t.Errorf("%s: entries %v, names %v (want sorted, alike, holding %s)", c.name, got, names, c.has)
		}
	}
	e := Entries(AdvantageFns)[slices.Index(Names(AdvantageFns), "grpo")]
	if !slices.Contains(e.Params.Names(), "epsilon") {
		t.Errorf("grpo's entry: params %v, want epsilon among them", e.Params.Names())
	}
}
