package golden

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/stages/tokens"
)

// TestKindsAreTheFixtures: the kinds table names exactly the kinds of
// fixtures/conformance, each documented, and Registry runs each of them.
func TestKindsAreTheFixtures(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(fixtures, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range files {
		want = append(want, strings.TrimSuffix(filepath.Base(f), ".json"))
	}
	slices.Sort(want)
	if got := Kinds().Names(); !slices.Equal(got, want) {
		t.Errorf("kinds %v, fixture files %v", got, want)
	}
	for _, e := range Kinds().Entries() {
		if e.Doc == "" {
			t.Errorf("kind %s has no doc", e.Name)
		}
	}
	reg, err := Registry(tokens.CPU)
	if err != nil {
		t.Fatal(err)
	}
	if got := reg.Kinds(); !slices.Equal(got, want) {
		t.Errorf("registry kinds %v, want %v", got, want)
	}
}
