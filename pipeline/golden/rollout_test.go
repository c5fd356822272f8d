package golden

import (
	"encoding/json"
	"maps"
	"testing"

	"github.com/rftpipe/rftpipe/stages/conformance"
	"github.com/rftpipe/rftpipe/stages/loss"
)

const fixtures = "../../fixtures/conformance"

// TestRolloutConformance runs every rollout_correction golden case: all must pass
// (error cases pass when we return an error).
func TestRolloutConformance(t *testing.T) {
	reg, err := conformance.NewRegistry(conformance.Kind{Name: "rollout_correction", New: rolloutRunner(loss.Default())})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := conformance.RunDir(fixtures, []string{"rollout_correction"}, reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range rep.Mismatches {
		t.Error(m)
	}
	f, err := conformance.Load(fixtures + "/rollout_correction.json")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed != 0 || rep.Skipped != 0 || rep.Passed != len(f.Cases) {
		t.Errorf("%s", rep.Summary())
	}
	t.Log(rep.Summary())
}

// TestVerlLosses2026 runs the cases of verl's dppo_tv, dppo_kl, clip_cov,
// kl_cov and dro (spec verl_losses_2026.md): every one passes, and a
// random clip_cov case fails with another permutation than the recorded
// one (the runner replays it).
func TestVerlLosses2026(t *testing.T) {
	f, err := conformance.Load(fixtures + "/rollout_correction.json")
	if err != nil {
		t.Fatal(err)
	}
	fns := map[string]bool{"dppo_tv": true, "dppo_kl": true, "clip_cov": true, "kl_cov": true, "dro": true}
	var cases []conformance.Case
	var random *conformance.Case
	for _, c := range f.Cases {
		if fns[c.Fn] {
			cases = append(cases, c)
			if c.Name == "policy_loss/clip_cov_random_ratio0.1_seed7" {
				random = &cases[len(cases)-1]
			}
		}
	}
	reg, err := conformance.NewRegistry(conformance.Kind{Name: "rollout_correction", New: rolloutRunner(loss.Default())})
	if err != nil {
		t.Fatal(err)
	}
	var rep conformance.Report
	conformance.RunFile(&conformance.File{Kind: f.Kind, Cases: cases}, reg, &rep)
	for _, m := range rep.Mismatches {
		t.Error(m)
	}
	if rep.Failed != 0 || rep.Passed != 40 {
		t.Errorf("%s, want 40 passed", rep.Summary())
	}
	if random == nil {
		t.Fatal("no case clip_cov_random_ratio0.1_seed7")
	}
	other := *random
	other.Call = maps.Clone(random.Call)
	other.Call["randperm"] = json.RawMessage("[9, 8, 7, 6, 5, 4, 3, 2, 1, 0]")
	rep = conformance.Report{}
	conformance.RunFile(&conformance.File{Kind: f.Kind, Cases: []conformance.Case{other}}, reg, &rep)
	if rep.Failed != 1 {
		t.Errorf("clip_cov with a reversed permutation: %s, want it to fail", rep.Summary())
	}
}
