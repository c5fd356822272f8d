package builder

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
		run  func(dir string) error
		want []string
	}{
		{"run", func(dir string) error {
			_, err := Run(context.Background(), &RunOptions{Common: Common{In: filepath.Join(repoRoot, "fixtures/stores/demo.parquet"),
				Metrics: filepath.Join(dir, "b", "m.json"), Prom: filepath.Join(dir, "c", "d", "p.prom")},
				AdvantageFn: "grpo", Out: filepath.Join(dir, "a", "out.parquet")}, ok)
			return err
		}, []string{"a/out.parquet", "b/m.json", "c/d/p.prom"}},
		{"loss", func(dir string) error {
			_, err := Loss(context.Background(), &LossOptions{Common: Common{In: filepath.Join(repoRoot, "fixtures/stores/full.parquet"),
				Step: 1, Metrics: filepath.Join(dir, "m", "m.json")},
				Fn: "ppo", KLLossFn: "none", EntropyLossFn: "default", Device: "cpu", GradOut: filepath.Join(dir, "grad.parquet")}, ok)
			return err
		}, []string{"grad.parquet", "m/m.json"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := c.run(dir); err != nil {
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

// ok is the exit status of a job that is not expected to fail.
func ok(error) int { return 0 }
