package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/rftpipe/rftpipe/stages/advantage"
	"github.com/rftpipe/rftpipe/stages/operator"
)

// TestOperatorsStream: the operator stage then grpo give the same output
// and rejected store read in 7-row batches as in one batch.
func TestOperatorsStream(t *testing.T) {
	dir := t.TempDir()
	in := "../fixtures/stores/full.parquet"
	run := func(rows int) (string, string) {
		reg := operator.Default()
		dyn, err := operator.New(reg, "dapo_dynamic_sampling", map[string]any{"correct_threshold": 0.5})
		if err != nil {
			t.Fatal(err)
		}
		mask, _ := operator.New(reg, "mask_response_truncated", nil)
		fn, err := advantage.Pipeline(advantage.Default(), "grpo", nil)
		if err != nil {
			t.Fatal(err)
		}
		out, rej := filepath.Join(dir, "out.parquet"), filepath.Join(dir, "rej.parquet")
		os.Remove(out)
		os.Remove(rej)
		stages := append([]Stage{Operators([]Operator{{"dapo_dynamic_sampling", dyn}, {"mask_response_truncated", mask}})}, PipelineSide("grpo", fn)...)
		res, err := Run(context.Background(), Job{In: in, Out: out, Rejected: rej, Stages: stages, BatchRows: rows})
		if err != nil {
			t.Fatal(err)
		}
		if res.Filtered == 0 || res.Rejected != res.Filtered {
			t.Errorf("batch %d: filtered %d, rejected %d: want equal, > 0", rows, res.Filtered, res.Rejected)
		}
		return rowsOf(t, out), rowsOf(t, rej)
	}
	o1, r1 := run(1 << 20)
	o7, r7 := run(7)
	if o1 != o7 || r1 != r7 {
		t.Error("7-row batches give another output or rejected store than one batch")
	}
}
