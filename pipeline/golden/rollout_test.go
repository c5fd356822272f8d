package golden

import (
	"testing"

	"github.com/rftpipe/rftpipe/stages/conformance"
	"github.com/rftpipe/rftpipe/stages/loss"
)

const fixtures = "../../fixtures/conformance"

// TestRolloutConformance runs every rollout_correction golden case: all must pass
// (error cases pass when we return an error).
func TestRolloutConformance(t *testing.T) {
	reg := conformance.NewRegistry()
	if err := reg.Add("rollout_correction", rolloutRunner(loss.Default())); err != nil {
		t.Fatal(err)
	}
	rep, err := conformance.RunDir(fixtures, []string{"rollout_correction"}, reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range rep.Mismatches {
		t.Error(m)
	}
	if rep.Failed != 0 || rep.Passed != 42 {
		t.Errorf("%s", rep.Summary())
	}
	t.Log(rep.Summary())
}
