package operator

import (
	"testing"

	"github.com/rftpipe/rftpipe/stages/conformance"
)

// TestConformance runs every operator golden case and expects all 17 to pass.
func TestConformance(t *testing.T) {
	reg, err := conformance.NewRegistry(conformance.Kind{Name: "operator", New: ConformanceRunner(nil)})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := conformance.RunDir("../../fixtures/conformance", []string{"operator"}, reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range rep.Mismatches {
		t.Error(m)
	}
	if rep.Failed != 0 || rep.Passed != 17 {
		t.Fatalf("%s (want 17 passed)", rep.Summary())
	}
}
