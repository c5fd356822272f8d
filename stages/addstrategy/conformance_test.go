package addstrategy

import (
	"testing"

	"github.com/rftpipe/rftpipe/stages/conformance"
)

// TestConformance runs every add_strategy golden case and expects 0 failures.
func TestConformance(t *testing.T) {
	reg, err := conformance.NewRegistry(conformance.Kind{Name: "add_strategy", New: ConformanceRunner(nil)})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := conformance.RunDir("../../fixtures/conformance", []string{"add_strategy"}, reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range rep.Mismatches {
		t.Error(m)
	}
	t.Log(rep.Summary())
	if rep.Failed != 0 || rep.Passed != 10 {
		t.Fatalf("%s (want 10 passed)", rep.Summary())
	}
}
