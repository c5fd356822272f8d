package builder

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rftpipe/rftpipe/pipeline"
	"github.com/rftpipe/rftpipe/stages/advantage"
	"github.com/rftpipe/rftpipe/stages/args"
)

// toyFn is a pipeline-side advantage fn for the test of the README's
// "Adding a new advantage fn" path: every row keeps and scores reward ×
// scale.
type toyFn struct{ scale float64 }

func (f toyFn) Plan(in *advantage.Input) (*advantage.Plan, error) {
	p := &advantage.Plan{Groups: in.Tasks, Keep: make([]bool, in.N()), Score: make([]float32, in.N())}
	for i, r := range in.Reward {
		p.Keep[i], p.Score[i] = true, float32(r*f.scale)
	}
	return p, nil
}

// toySpec is the fn's spec, as a new fn's file declares it.
func toySpec() advantage.Spec {
	return advantage.Spec{
		Name:   "toy_scaled_reward",
		Doc:    "advantage = reward × scale (a test fn)",
		Params: args.Schema{{Name: "scale", Kind: args.Float, Ctor: 1.0, Default: 1.0, InDefaults: true, Doc: "the factor"}},
		New: advantage.PipelineCtor(func(a args.Values) (advantage.PipelineFn, error) {
			return toyFn{scale: a.Float("scale")}, nil
		}),
	}
}

// TestRegisterToyFn registers a toy fn as the README says a new fn is
// added (its spec, one more entry in the registry's table) and runs it
// through the path of `run --advantage-fn NAME --arg scale=2`: the spec's
// --arg parsing, AdvantageStages and the engine. The registry it was added
// to is a new one: the built-in one is left as it was.
func TestRegisterToyFn(t *testing.T) {
	reg, err := advantage.Default().With(toySpec()) // the table's one entry
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(advantage.Default().Names(), "toy_scaled_reward") {
		t.Error("With changed the built-in registry")
	}
	spec, err := reg.Get("toy_scaled_reward")
	if err != nil {
		t.Fatal(err)
	}
	user, err := spec.Params.ParseKV([]string{"scale=2"})
	if err != nil {
		t.Fatal(err)
	}
	stages, err := AdvantageStages(reg, "toy_scaled_reward", user, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out.parquet")
	res, err := pipeline.Run(context.Background(), pipeline.Job{In: filepath.Join(repoRoot, "fixtures/stores/demo.parquet"), Out: out, Stages: stages})
	if err != nil {
		t.Fatal(err)
	}
	if res.In != 384 || res.Out != 384 {
		t.Fatalf("result %+v", res)
	}
	_, rewards, adv := readOutput(t, out)
	scored := 0
	for i, a := range adv {
		for _, v := range a {
			if v != 0 {
				scored++
			}
			if v != 0 && math.Abs(float64(v)-2*rewards[i]) > 1e-6 {
				t.Fatalf("row %d: advantage %v, want 2 × reward %v", i, v, rewards[i])
			}
		}
	}
	if scored == 0 {
		t.Error("no token was scored")
	}
}
