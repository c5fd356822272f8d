package build

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestMissingOutputDirectoriesMade: the missing directories of run's store
// and of the metrics and Prometheus files are made, by either command.
func TestMissingOutputDirectoriesMade(t *testing.T) {
	for _, c := range []struct {
		name string
		o    func(dir string) *Options
		want []string
	}{
		{"run", func(dir string) *Options {
			return &Options{Command: Run, AdvantageFn: "grpo", In: filepath.Join(repoRoot, "fixtures/stores/demo.parquet"),
				Out: filepath.Join(dir, "a", "out.parquet"), Metrics: filepath.Join(dir, "b", "m.json"), Prom: filepath.Join(dir, "c", "d", "p.prom")}
		}, []string{"a/out.parquet", "b/m.json", "c/d/p.prom"}},
		{"loss", func(dir string) *Options {
			return &Options{Command: Loss, Fn: "ppo", In: filepath.Join(repoRoot, "fixtures/stores/full.parquet"),
				KLLossFn: "none", EntropyLossFn: "default", Device: "cpu", Step: 1, GradOut: filepath.Join(dir, "grad.parquet"), Metrics: filepath.Join(dir, "m", "m.json")}
		}, []string{"grad.parquet", "m/m.json"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if _, _, err := Execute(context.Background(), c.o(dir), func(error) int { return 0 }); err != nil {
				t.Fatal(err)
			}
			for _, f := range c.want {
				if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
					t.Errorf("%s: %v", f, err)
				}
			}
		})
	}
}
