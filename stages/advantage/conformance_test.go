package advantage

import (
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/stages/conformance"
)

// TestConformance runs every advantage golden case, random ones on their
// deterministic part, and expects 0 failures.
func TestConformance(t *testing.T) {
	reg, err := conformance.NewRegistry(conformance.Kind{Name: "advantage", New: ConformanceRunner(nil)})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := conformance.RunDir("../../fixtures/conformance", []string{"advantage"}, reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range rep.Mismatches {
		t.Error(m)
	}
	t.Log(rep.Summary())
	if rep.Failed != 0 || rep.Passed != 72 {
		t.Fatalf("%s (want 72 passed)", strings.TrimSpace(rep.Summary()))
	}
}
