package loss

import (
	"testing"

	"github.com/rftpipe/rftpipe/stages/conformance"
)

const fixtures = "../../fixtures/conformance"

// TestConformance runs every policy_loss golden case: all must pass (error
// cases pass when we return an error).
func TestConformance(t *testing.T) {
	reg, err := conformance.NewRegistry(conformance.Kind{Name: "policy_loss", New: ConformanceRunner(Default())})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := conformance.RunDir(fixtures, []string{"policy_loss"}, reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range rep.Mismatches {
		t.Error(m)
	}
	if rep.Failed != 0 || rep.Passed == 0 {
		t.Errorf("%s", rep.Summary())
	}
	t.Log(rep.Summary())
}
