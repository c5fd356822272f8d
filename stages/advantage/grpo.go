package advantage

import "github.com/rftpipe/rftpipe/stages/args"

// GRPO is the pipeline-side grpo fn (GRPOGroupedAdvantage): per tid group,
// score = (reward − mean) / (std + epsilon) with float32 statistics.
type GRPO struct {
	Epsilon float64
	// StdThreshold, if set, drops groups whose std <= threshold and every
	// singleton group.
	StdThreshold *float64
	// Duplicate refills the dropped groups with copies of kept ones
	// (RefillGroups); only honoured with StdThreshold set, as upstream.
	Duplicate bool
	// RankPenalty, if set, scales each reward by 1 − rank/n·penalty before
	// the group statistics (rank of the row's mean log-prob, 0 = lowest).
	RankPenalty *float64
	// BatchStd uses the std of all input rewards instead of the group's.
	BatchStd bool
	// AdjustedScore uses the rank-adjusted reward in the numerator too (Q-01 fix).
	AdjustedScore bool
	// DrGRPO leaves out the std normalisation: score = reward − mean.
	DrGRPO bool
	// Singleton is the one-experience group policy.
	Singleton SingletonPolicy
}

func grpoSpec() Spec {
	return Spec{
		Name: "grpo",
		Doc:  "group-relative advantage (reward − mean)/(std + ε) per task group",
		Params: args.Schema{
			paramEpsilon, paramStdThreshold,
			param("duplicate_experiences", args.Bool, false, "refill dropped groups with copies of kept groups (needs std_threshold)"),
			param("rank_penalty", args.Float, nil, "scale rewards by 1 − rank/n·penalty for the statistics (rank of mean logprob)"),
			paramStdCal,
			flag("rank_penalty_adjusted_score", "Q-01 fix: use the adjusted reward in the numerator too"),
			flag("dr_grpo", "Dr.GRPO: no std normalisation, score = reward − mean"),
			paramSingleton,
		},
		New: PipelineCtor(func(a args.Values) (PipelineFn, error) {
			g := &GRPO{
				Epsilon:       a.Float("epsilon"),
				Duplicate:     a.Bool("duplicate_experiences"),
				BatchStd:      a.String("std_cal_level") == "batch",
				AdjustedScore: a.Bool("rank_penalty_adjusted_score"),
				DrGRPO:        a.Bool("dr_grpo"),
				Singleton:     singleton(a),
			}
			if t, ok := a.OptFloat("std_threshold"); ok {
				g.StdThreshold = &t
			}
			if r, ok := a.OptFloat("rank_penalty"); ok {
				g.RankPenalty = &r
			}
			return g, nil
		}),
	}
}

// Plan implements PipelineFn. Metrics: group_advantages/reward_{mean,std}/*
// (skipped groups included) and filtered_count.
func (f *GRPO) Plan(in *Input) (*Plan, error) {
	if err := checkInput("grpo", in); err != nil {
		return nil, err
	}
	if f.RankPenalty != nil && len(in.LogprobMean) != in.N() {
		return nil, errorf("grpo", "rank_penalty needs the mean logprob of every row (%d of %d)", len(in.LogprobMean), in.N())
	}
	rule := f.rule(prec32, in.Reward)
	rule.q = in.LogprobMean
	p, err := planGroups(in, rule, f.Singleton)
	if err != nil {
		return nil, err
	}
	p.Metrics["filtered_count"] = float64(p.Filtered)
	if f.Duplicate && f.StdThreshold != nil {
		RefillGroups(p, NewRNG(in.Seed))
	}
	return p, nil
}

// rule returns the group rule of f over the values all (for the batch std).
func (f *GRPO) rule(prec precision, all []float64) *grpoRule {
	r := &grpoRule{eps: f.Epsilon, prec: prec, adjusted: f.AdjustedScore, dr: f.DrGRPO}
	if f.StdThreshold != nil {
		r.threshold, r.hasThreshold = *f.StdThreshold, true
	}
	if f.RankPenalty != nil {
		r.penalty, r.hasPenalty = *f.RankPenalty, true
	}
	if f.BatchStd {
		r.useBatch = true
		r.batchStd = 1
		if len(all) > 1 {
			_, r.batchStd = prec.meanStd(all)
		}
	}
	return r
}

// grpoRule is the GRPO group rule, shared by grpo, step_wise_grpo (on the
// last-step rewards of the runs), grpo_verl, clipb and clipv.
type grpoRule struct {
	eps                  float64
	threshold            float64
	hasThreshold         bool
	useBatch             bool
	batchStd             float64
	penalty              float64
	hasPenalty, adjusted bool
	dr                   bool
	prec                 precision
	q                    []float64 // mean logprob per input row (rank penalty)
	adj                  []float64 // scratch: rank-adjusted rewards
	order                []int     // scratch: rank order
}

func (r *grpoRule) metricNames() []string { return []string{"reward_mean", "reward_std"} }

func (r *grpoRule) apply(g *group) (bool, error) {
	n := len(g.v)
	num := g.v // the score numerators
	mean, std := 0.0, 1.0
	keep := true
	if n == 1 {
		keep = !r.hasThreshold
	} else {
		stats := g.v
		if r.hasPenalty {
			stats = r.rankAdjust(g)
			if r.adjusted {
				num = stats
			}
		}
		mean, std = r.prec.meanStd(stats)
		keep = !r.hasThreshold || std > r.threshold
	}
	g.met[0], g.met[1] = mean, std
	if !keep {
		return false, nil
	}
	denom := std
	if r.useBatch {
		denom = r.batchStd
	}
	for i, x := range num {
		if r.dr {
			g.score[i] = r.prec.sub(x, mean)
		} else {
			g.score[i] = r.prec.norm(x, mean, denom, r.eps)
		}
	}
	return true, nil
}

// rankAdjust returns the group's float32 rewards scaled by
// 1 − rank/n·penalty, rank = position of the row's mean log-prob in
// ascending order (ties by input order: a stable sort, Q-41).
func (r *grpoRule) rankAdjust(g *group) []float64 {
	n := len(g.v)
	r.order = r.order[:0]
	for i := 0; i < n; i++ {
		r.order = append(r.order, i)
	}
	// Insertion sort: groups are small and the sort must be stable.
	for i := 1; i < n; i++ {
		for j := i; j > 0 && r.q[g.rows[r.order[j]]] < r.q[g.rows[r.order[j-1]]]; j-- {
			r.order[j], r.order[j-1] = r.order[j-1], r.order[j]
		}
	}
	if cap(r.adj) < n {
		r.adj = make([]float64, n)
	}
	adj := r.adj[:n]
	pen := float32(r.penalty)
	for rank, i := range r.order {
		scale := 1 - float32(rank)/float32(n)*pen
		adj[i] = float64(float32(g.v[i]) * scale)
	}
	return adj
}
