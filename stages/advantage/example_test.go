package advantage_test

import (
	"fmt"

	"github.com/rftpipe/rftpipe/stages/advantage"
)

// The pipeline's use of a pipeline-side fn: scalars and a grouping in, a
// Plan out; the token columns are written while streaming the rows.
func Example() {
	// Per-row scalars of one batch, and the dense tid group id of each row
	// (e.g. from DuckDB: dense_rank over the group's first row index).
	reward := []float64{1, 0, 1, 1, 0.5}
	tid := []int32{0, 0, 1, 1, 2}
	tasks, err := advantage.GroupByIDs(tid, 3)
	if err != nil {
		panic(err)
	}
	spec, err := advantage.Default().Get("grpo")
	if err != nil {
		panic(err)
	}
	user, err := spec.Params.ParseKV([]string{"std_threshold=0", "duplicate_experiences=true"}) // --arg flags
	if err != nil {
		panic(err)
	}
	fn, err := advantage.Pipeline(advantage.Default(), "grpo", user)
	if err != nil {
		panic(err)
	}
	plan, err := fn.Plan(&advantage.Input{Reward: reward, Tasks: tasks, Seed: 1})
	if err != nil {
		panic(err)
	}
	adv := make([]float32, 3)
	for _, o := range plan.Output() { // or: stream rows in input order using plan.Keep
		advantage.Broadcast(adv, plan.Score[o.Row], []bool{true, true, false})
		fmt.Printf("row %d dup %d: %.4f\n", o.Row, o.Dup, adv)
	}
	fmt.Println("filtered_count", plan.Metrics["filtered_count"])
	// Output:
	// row 0 dup -1: [0.7071 0.7071 0.0000]
	// row 1 dup -1: [-0.7071 -0.7071 -0.0000]
	// row 0 dup 0: [0.7071 0.7071 0.0000]
	// row 1 dup 0: [-0.7071 -0.7071 -0.0000]
	// row 0 dup 1: [0.7071 0.7071 0.0000]
	// row 1 dup 1: [-0.7071 -0.7071 -0.0000]
	// filtered_count 3
}
