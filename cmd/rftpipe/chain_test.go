package main

import (
	"encoding/json"
	"math"
	"path/filepath"
	"testing"

	"github.com/rftpipe/rftpipe/pipeline/algorithm"
)

// TestEveryPresetChains runs every algorithm preset as a user chains it:
// `run --algorithm NAME` over a bundled store that carries every optional
// input, then `loss --algorithm NAME` over its output; the loss is finite.
func TestEveryPresetChains(t *testing.T) {
	names := algorithm.Default().Names()
	if len(names) != 24 {
		t.Fatalf("%d presets, want 24", len(names))
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			in := "../../fixtures/stores/full.parquet"
			switch name {
			case "dpo":
				in = "../../fixtures/stores/dpo_pairs.parquet"
			case "gigpo": // anchor states in info
				in = "../../fixtures/stores/gigpo.parquet"
			}
			out := filepath.Join(t.TempDir(), "out.parquet")
			if _, stderr, code := runCLI(t, "run", "--algorithm", name, "--in", in, "--out", out, "--progress", "never"); code != 0 {
				t.Fatalf("run: exit %d: %s", code, stderr)
			}
			stdout, stderr, code := runCLI(t, "loss", "--algorithm", name, "--in", out, "--format", "json")
			if code != 0 {
				t.Fatalf("loss: exit %d: %s", code, stderr)
			}
			var res lossOutput
			if err := json.Unmarshal([]byte(stdout), &res); err != nil {
				t.Fatalf("%v: %s", err, stdout)
			}
			if res.Loss == nil || math.IsNaN(*res.Loss) || math.IsInf(*res.Loss, 0) || res.Rows == 0 {
				t.Fatalf("loss %v over %d rows: %s", res.Loss, res.Rows, stdout)
			}
		})
	}
}
