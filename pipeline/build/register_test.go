package build

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

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
		NewPipeline: func(a args.Values) (advantage.PipelineFn, error) {
			return toyFn{scale: a.Float("scale")}, nil
		},
	}
}

// TestRegisterToyFn registers a toy fn as the README says a new fn is
// added (its spec, one line in the Default registry's table) and finds it
// everywhere: in the help text and as `run --advantage-fn NAME --arg
// scale=2`, built by RunOptions.Job and run by Run.
func TestRegisterToyFn(t *testing.T) {
	if err := advantage.Default().Add(toySpec()); err != nil { // the table's one line
		t.Fatal(err)
	}
	if h := AdvantageHelp(); !strings.Contains(h, "toy_scaled_reward") || !strings.Contains(h, "scale=1") {
		t.Errorf("help text lacks the toy fn:\n%s", h)
	}
	o := &RunOptions{Common: Common{In: filepath.Join(repoRoot, "fixtures/stores/demo.parquet")}, AdvantageFn: "toy_scaled_reward", Args: []string{"scale=2"},
		Out: filepath.Join(t.TempDir(), "new", "out.parquet")}
	if _, err := o.Job(); err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), o, func(error) int { return 0 })
	if err != nil {
		t.Fatal(err)
	}
	if res.In != 384 || res.Out != 384 {
		t.Fatalf("result %+v", res)
	}
	_, rewards, adv := readOutput(t, res.Store)
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
