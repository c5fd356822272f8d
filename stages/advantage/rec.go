package advantage

import (
	"math"

	"github.com/rftpipe/rftpipe/stages/args"
)

// REC is the pipeline-side rec fn: advantage = reward − mean (÷ (std + ε) with
// StdNormalize) over the group's kept rows, mean and POPULATION std of the
// kept rows; with DropBalance, surplus below-mean rows are zeroed.
type REC struct {
	Epsilon      float64
	StdNormalize bool
	// DropBalance zeroes (neg − pos) randomly chosen rows with a reward below
	// the group mean when they outnumber the others (drop="balance").
	DropBalance bool
	// Singleton: upstream fails on a one-experience group; unit treats
	// it as mean 0, std 1, no drop.
	Singleton SingletonPolicy
}

func recSpec() Spec {
	return Spec{
		Name: "rec",
		Doc:  "reward minus the mean of the kept rows, optionally balancing positives and negatives",
		Params: args.Schema{paramEpsilon,
			param("std_normalize", args.Bool, false, "divide by the population std + ε"),
			{Name: "drop", Kind: args.String, Nullable: true, InDefaults: true, Choices: []string{"balance"},
				Doc: "null, or balance: zero surplus negatives"},
			paramSingleton},
		New: PipelineCtor(func(a args.Values) (PipelineFn, error) {
			return &REC{Epsilon: a.Float("epsilon"), StdNormalize: a.Bool("std_normalize"),
				DropBalance: a.String("drop") == "balance", Singleton: singleton(a)}, nil
		}),
	}
}

// Plan implements PipelineFn. Metrics: group_advantages/{drop_balance,reward_mean,reward_std}/*.
func (f *REC) Plan(in *Input) (*Plan, error) {
	if err := checkInput("rec", in); err != nil {
		return nil, err
	}
	return planGroups(in, &recRule{f: f, rng: NewRNG(in.Seed)}, f.Singleton)
}

type recRule struct {
	f       *REC
	rng     *RNG
	dropped []bool
	neg     []int
}

func (r *recRule) metricNames() []string {
	return []string{"drop_balance", "reward_mean", "reward_std"}
}

func (r *recRule) apply(g *group) (bool, error) {
	n := len(g.v)
	if n == 1 && !g.fixed {
		return false, errorf("rec", "group %d (row %d) has a single experience: upstream fails here (Q-03); "+
			"set singleton_group_policy to unit, zero or drop", g.idx, g.rows[0])
	}
	if cap(r.dropped) < n {
		r.dropped = make([]bool, n)
	}
	r.dropped = r.dropped[:n]
	clear(r.dropped)
	dropFrac := 0.0
	if n > 1 && r.f.DropBalance {
		mean0 := prec32.round(prec32.mean(g.v))
		r.neg = r.neg[:0]
		for i, x := range g.v {
			if prec32.round(x) < mean0 {
				r.neg = append(r.neg, i)
			}
		}
		if surplus := len(r.neg) - (n - len(r.neg)); surplus > 0 {
			Shuffle(r.rng, r.neg, surplus)
			for _, i := range r.neg[:surplus] {
				r.dropped[i] = true
			}
			dropFrac = float64(surplus) / float64(n)
		}
	}
	// Mean and population std of the kept rows (mean 0, std 1 if <= 1 kept).
	mean, std := 0.0, 1.0
	kept, sum := 0, 0.0
	for i, x := range g.v {
		if !r.dropped[i] {
			kept++
			sum += prec32.round(x)
		}
	}
	if kept > 1 && n > 1 {
		m := sum / float64(kept)
		ss := 0.0
		for i, x := range g.v {
			if !r.dropped[i] {
				d := prec32.round(x) - m
				ss += d * d
			}
		}
		mean, std = prec32.round(m), prec32.round(math.Sqrt(ss/float64(kept)))
	}
	g.met[0], g.met[1], g.met[2] = dropFrac, mean, std
	for i, x := range g.v {
		switch {
		case r.dropped[i]:
			g.score[i] = 0
		case r.f.StdNormalize:
			g.score[i] = prec32.norm(x, mean, std, r.f.Epsilon)
		default:
			g.score[i] = prec32.sub(x, mean)
		}
	}
	return true, nil
}
