package entropy

import (
	"testing"

	"github.com/rftpipe/rftpipe/stages/conformance"
)

// TestConformance runs every entropy golden case: all must pass.
func TestConformance(t *testing.T) {
	reg, err := conformance.NewRegistry(conformance.Kind{Name: "entropy", New: ConformanceRunner()})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := conformance.RunDir("../../fixtures/conformance", []string{"entropy"}, reg)
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
