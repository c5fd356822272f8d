package job

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/pipeline/algorithm"
)

// repoRoot is the repository root, where job files' relative paths start.
const repoRoot = "../.."

// TestFixtureConfigs checks fixtures/configs: one job file per algorithm
// type, each resolving cleanly and reading a bundled store.
func TestFixtureConfigs(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot, "fixtures/configs/*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		names = append(names, name)
		t.Run(name, func(t *testing.T) {
			j, err := Load(f)
			if err != nil {
				t.Fatal(err)
			}
			if j.Algorithm.AlgorithmType != name {
				t.Errorf("algorithm_type %q in %s.yaml", j.Algorithm.AlgorithmType, name)
			}
			if _, err := os.Stat(j.Input); err != nil {
				t.Errorf("input: %v", err)
			}
			if j.Output == "" || j.Metrics == "" || j.Prom == "" || !j.HasSeed {
				t.Errorf("job lacks output, metrics, prom or seed: %+v", j)
			}
			if _, err := j.Resolve(); err != nil {
				t.Error(err)
			}
		})
	}
	if want := algorithm.Default().Names(); !slices.Equal(names, want) {
		t.Errorf("fixtures/configs has %v, want one file per type %v", names, want)
	}
}
