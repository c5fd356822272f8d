package advantage

import (
	"math"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
)

// gdpoEps is TRL's epsilon in both normalisations (not grpo's 1e-6).
const gdpoEps = 1e-4

// GDPO is the pipeline-side gdpo fn: TRL's multi-reward
// multi_objective_aggregation="normalize_then_sum". Each reward component is
// normalised within its task group (NaN components skipped), the weighted
// components are summed (NaN terms count 0) and the sums are whitened over
// the whole input. Rows keep input order; nothing is dropped.
type GDPO struct {
	// Generations is num_generations (G): every task group must have G rows;
	// 0 takes the task groups as they are.
	Generations int
	// Weights are the component weights (nil: all ones), rounded to float32
	// as TRL stores them.
	Weights []float64
}

func gdpoSpec() Spec {
	return Spec{
		Name: "gdpo",
		Doc:  "multi-reward: each reward component normalised per task group, weighted sum, batch whitening (TRL normalize_then_sum)",
		Params: args.Schema{
			{Name: "multi_objective_aggregation", Kind: args.String, Ctor: "normalize_then_sum", Default: "normalize_then_sum",
				InDefaults: true, Choices: []string{"normalize_then_sum"}, Doc: "how the components are combined (TRL's name)"},
			param("num_generations", args.Int, nil, "rows per task group (G); null: the task groups as they are").In(schema.AtLeast1),
			param("reward_weights", args.Floats, nil, "one weight per reward component; null: all ones"),
		},
		New: PipelineCtor(func(a args.Values) (PipelineFn, error) {
			f := &GDPO{Generations: int(a.Int("num_generations"))}
			var sum float32 // of the magnitudes: a bound on every weighted sum
			for _, w := range a.Floats("reward_weights") {
				f.Weights = append(f.Weights, float64(float32(w)))
				sum += float32(math.Abs(float64(float32(w))))
			}
			if math.IsInf(float64(sum), 0) {
				return nil, errorf("gdpo", "reward_weights %v: their float32 sum overflows, so every weighted reward sum may be infinite", a.Floats("reward_weights"))
			}
			return f, nil
		}),
	}
}

// Needs implements Needer: the reward components; the reward itself is not
// read, so a row with a null reward takes part.
func (f *GDPO) Needs() Needs { return Needs{Components: true, InvalidRewards: true} }

// CrossBatch implements CrossBatcher: the sums are whitened over the input.
func (f *GDPO) CrossBatch() string {
	return "gdpo whitens the weighted reward sums over the whole input"
}

// Aggregated returns, per row, the weighted sum of the group-normalised
// components (TRL's aggregated rewards, before the batch whitening).
func (f *GDPO) Aggregated(in *Input) ([]float64, error) {
	const fn = "gdpo"
	if err := checkInput(fn, in); err != nil {
		return nil, err
	}
	n, k := in.N(), len(in.Components)
	if k == 0 && n > 0 {
		return nil, errorf(fn, "no reward components (columns reward_<name>)")
	}
	for c, col := range in.Components {
		if len(col) != n {
			return nil, errorf(fn, "reward component %d has %d values for %d rows", c, len(col), n)
		}
	}
	w := f.Weights
	if w == nil {
		w = make([]float64, k)
		for i := range w {
			w[i] = 1
		}
	}
	if len(w) != k {
		return nil, errorf(fn, "reward_weights has %d values for %d reward components", len(w), k)
	}
	s := make([]float64, n)
	for g := 0; g < in.Tasks.Len(); g++ {
		rows := in.Tasks.Group(g)
		if f.Generations > 0 && len(rows) != f.Generations {
			return nil, errorf(fn, "task group %d has %d rows, num_generations is %d", g, len(rows), f.Generations)
		}
		for c, col := range in.Components {
			mean, std := nanMeanStd(col, rows)
			for _, r := range rows {
				z := (col[r] - mean) / (std + gdpoEps)
				if !math.IsNaN(z) {
					s[r] += z * w[c]
				}
			}
		}
	}
	return s, nil
}

// nanMeanStd returns the mean and TRL's nanstd of col's non-NaN values at
// rows: the population variance times count/(count−1), that factor in
// float32; NaN for fewer than two values, 0 for a one-row group.
func nanMeanStd(col []float64, rows []int32) (mean, std float64) {
	c, sum := 0, 0.0
	for _, r := range rows {
		if !math.IsNaN(col[r]) {
			c++
			sum += col[r]
		}
	}
	if c == 0 {
		return math.NaN(), math.NaN()
	}
	mean = sum / float64(c)
	if len(rows) == 1 {
		return mean, 0
	}
	if c < 2 {
		return mean, math.NaN()
	}
	ss := 0.0
	for _, r := range rows {
		if d := col[r] - mean; !math.IsNaN(d) {
			ss += d * d
		}
	}
	bessel := float64(float32(c) / float32(c-1))
	return mean, math.Sqrt(ss / float64(c) * bessel)
}

// Plan implements PipelineFn: the score of a row is its aggregated reward
// whitened over the input, (s − mean) / (std + 1e-4), std unbiased (0 for
// one row). No metrics.
func (f *GDPO) Plan(in *Input) (*Plan, error) {
	s, err := f.Aggregated(in)
	if err != nil {
		return nil, err
	}
	n := len(s)
	p := inputOrderPlan(n, true)
	p.Metrics = agg.Metrics{}
	if n == 0 {
		return p, nil
	}
	mean := 0.0
	for _, x := range s {
		mean += x
	}
	mean /= float64(n)
	std := 0.0
	if n > 1 {
		ss := 0.0
		for _, x := range s {
			ss += (x - mean) * (x - mean)
		}
		std = math.Sqrt(ss / float64(n-1))
	}
	for i, x := range s {
		p.Score[i] = float32((x - mean) / (std + gdpoEps))
	}
	return p, nil
}
