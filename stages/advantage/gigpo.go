package advantage

import (
	"math"

	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
)

// GiGPO is the pipeline-side gigpo fn (Trinity 0.6 line, GiGPOAdvantageFn):
// an episode-level advantage A_E (the runs of a task normalised on their
// undiscounted return) plus Omega × a step-level advantage A_S (the rows
// that share an anchor state, info[env_state_hash_key], across the whole
// input, normalised on their discounted return-to-go). Rows keep input
// order; nothing is dropped.
type GiGPO struct {
	Omega, Gamma, Epsilon float64
	// StdNorm divides by the unbiased std (fnorm "std"); else by 1 ("none").
	StdNorm bool
	// StepRewardKey and StateHashKey are the info keys the group pass reads.
	StepRewardKey, StateHashKey string
}

func gigpoSpec() Spec {
	return Spec{
		Name: "gigpo",
		Doc:  "group-in-group: episode advantage per task plus omega × step advantage per anchor state (info.env_state_hash)",
		Params: args.Schema{
			param("omega", args.Float, 1.0, "weight of the step-level advantage"),
			param("gamma", args.Float, 1.0, "discount of the step-level return-to-go"),
			{Name: "fnorm", Kind: args.String, Ctor: "none", Default: "none", InDefaults: true, Choices: []string{"std", "none"},
				Doc: "std: divide by the unbiased group std; none: by 1"},
			paramEpsilon,
			param("step_reward_key", args.String, "step_reward", "info key of the per-step reward"),
			param("env_state_hash_key", args.String, "env_state_hash", "info key of the anchor-state hash"),
		},
		New: PipelineCtor(func(a args.Values) (PipelineFn, error) {
			return &GiGPO{Omega: a.Float("omega"), Gamma: a.Float("gamma"), Epsilon: a.Float("epsilon"),
				StdNorm: a.String("fnorm") == "std", StepRewardKey: a.String("step_reward_key"),
				StateHashKey: a.String("env_state_hash_key")}, nil
		}),
	}
}

// Needs implements Needer: runs, steps, the step rewards and the anchors.
func (f *GiGPO) Needs() Needs {
	return Needs{Runs: true, Step: true, StepReward: f.StepRewardKey, Anchor: f.StateHashKey}
}

// CrossBatch implements CrossBatcher: anchors are shared by every batch.
func (f *GiGPO) CrossBatch() string {
	return "gigpo's anchor groups (info." + f.StateHashKey + ") span every batch of the input"
}

// normalize scores v as upstream's float32 group normalisation: a single
// value has mean 0 and denominator 1; the denominator is the unbiased std
// with std norm, else 1. It returns the mean and the denominator.
func (f *GiGPO) normalize(v, dst []float64) (mean, den float64) {
	den = 1
	if len(v) > 1 {
		var std float64
		mean, std = prec32.meanStd(v)
		if f.StdNorm {
			den = std
		}
	}
	for i, x := range v {
		dst[i] = prec32.norm(x, mean, den, f.Epsilon)
	}
	return mean, den
}

// Plan implements PipelineFn. Metrics: gigpo/episode_reward_{mean,std}/*
// (std: the denominator, Q-52), gigpo/anchor_groups_total,
// gigpo/anchor_groups_size_gt1, gigpo/anchor_group_hit_ratio,
// gigpo/mean_abs_A_E, gigpo/mean_abs_A_S and experience_count; empty input
// gives no metrics.
func (f *GiGPO) Plan(in *Input) (*Plan, error) {
	const fn = "gigpo"
	if err := checkInput(fn, in); err != nil {
		return nil, err
	}
	n := in.N()
	p := inputOrderPlan(n, true)
	p.Metrics = agg.Metrics{}
	if n == 0 {
		return p, nil
	}
	if err := in.Runs.check("rid", n); err != nil {
		return nil, errorf(fn, "%v", err)
	}
	switch {
	case len(in.Step) != n:
		return nil, errorf(fn, "needs eid.step of every row (%d of %d)", len(in.Step), n)
	case len(in.StepReward) != n || len(in.HasStepReward) != n:
		return nil, errorf(fn, "needs info.%s of every row", f.StepRewardKey)
	case len(in.Anchor) != n:
		return nil, errorf(fn, "needs info.%s of every row", f.StateHashKey)
	}
	taskRuns, err := runsOfTasks(fn, in, in.Runs)
	if err != nil {
		return nil, err
	}
	runs := sortRunsByStep(in.Runs, in.Step)
	togo, ret := f.returns(in, runs)
	ae, means, dens := f.episodeAdvantages(taskRuns, ret)
	as, anchors, gt1, err := f.stepAdvantages(in, togo)
	if err != nil {
		return nil, errorf(fn, "anchors: %v", err)
	}

	runOf := runs.IDOf(n)
	sumE, sumS := 0.0, 0.0
	for row := 0; row < n; row++ {
		e := ae[runOf[row]]
		p.Score[row] = float32(e + f.Omega*as[row])
		sumE += math.Abs(e)
		sumS += math.Abs(as[row])
	}
	p.Metrics.Summarize("gigpo", "episode_reward_mean", means)
	p.Metrics.Summarize("gigpo", "episode_reward_std", dens)
	p.Metrics["gigpo/anchor_groups_total"] = float64(anchors)
	p.Metrics["gigpo/anchor_groups_size_gt1"] = float64(gt1)
	p.Metrics["gigpo/anchor_group_hit_ratio"] = 0
	if anchors > 0 {
		p.Metrics["gigpo/anchor_group_hit_ratio"] = float64(gt1) / float64(anchors)
	}
	p.Metrics["gigpo/mean_abs_A_E"] = sumE / float64(n)
	p.Metrics["gigpo/mean_abs_A_S"] = sumS / float64(n)
	p.Metrics["experience_count"] = float64(n)
	return p, nil
}

// returns computes, per run (rows sorted by step), the discounted
// return-to-go of each row and the undiscounted episode return.
func (f *GiGPO) returns(in *Input, runs Groups) (togo, ret []float64) {
	togo = make([]float64, in.N())
	ret = make([]float64, runs.Len())
	for r := 0; r < runs.Len(); r++ {
		rows := runs.Group(r)
		dense := false
		for _, row := range rows {
			dense = dense || in.HasStepReward[row]
		}
		// A NaN or infinite step reward or final reward propagates into the
		// run's return, its task's A_E and its anchor groups' A_S, as
		// upstream's float arithmetic does.
		reward := func(k int) float64 {
			row := rows[k]
			switch {
			case dense && in.HasStepReward[row]:
				return in.StepReward[row]
			case dense || k < len(rows)-1:
				return 0
			}
			return in.Reward[row]
		}
		sum, g := 0.0, 0.0
		for k := range rows {
			sum += reward(k)
		}
		for k := len(rows) - 1; k >= 0; k-- {
			g = reward(k) + f.Gamma*g
			togo[rows[k]] = g
		}
		ret[r] = sum
	}
	return togo, ret
}

// episodeAdvantages normalises the runs' episode returns task by task: the
// episode advantage of each run, and each task's mean and denominator.
func (f *GiGPO) episodeAdvantages(taskRuns Groups, ret []float64) (ae, means, dens []float64) {
	ae = make([]float64, len(ret))
	var vbuf, sbuf []float64
	for t := 0; t < taskRuns.Len(); t++ {
		tr := taskRuns.Group(t)
		vbuf, sbuf = vbuf[:0], sbuf[:0]
		for _, r := range tr {
			vbuf, sbuf = append(vbuf, ret[r]), append(sbuf, 0)
		}
		mean, den := f.normalize(vbuf, sbuf)
		for k, r := range tr {
			ae[r] = sbuf[k]
		}
		means, dens = append(means, mean), append(dens, den)
	}
	return ae, means, dens
}

// stepAdvantages normalises the rows' returns-to-go within the anchor
// groups of the whole input (a row without an anchor, or alone in its
// group, gets 0). It returns the step advantage of each row, the number of
// anchor groups and of those with more than one row.
func (f *GiGPO) stepAdvantages(in *Input, togo []float64) (as []float64, anchors, gt1 int, err error) {
	n := in.N()
	as = make([]float64, n)
	nAnchors := int32(0)
	for _, a := range in.Anchor {
		nAnchors = max(nAnchors, a+1)
	}
	anchorIDs := make([]int32, 0, n)
	anchorRows := make([]int32, 0, n)
	for row, a := range in.Anchor {
		if a >= 0 {
			anchorIDs, anchorRows = append(anchorIDs, a), append(anchorRows, int32(row))
		}
	}
	groups, err := GroupByIDs(anchorIDs, int(nAnchors))
	if err != nil {
		return nil, 0, 0, err
	}
	var vbuf, sbuf []float64
	for a := 0; a < groups.Len(); a++ {
		members := groups.Group(a)
		if len(members) < 2 {
			continue
		}
		gt1++
		vbuf, sbuf = vbuf[:0], sbuf[:0]
		for _, m := range members {
			vbuf, sbuf = append(vbuf, togo[anchorRows[m]]), append(sbuf, 0)
		}
		f.normalize(vbuf, sbuf)
		for k, m := range members {
			as[anchorRows[m]] = sbuf[k]
		}
	}
	return as, groups.Len(), gt1, nil
}

// inputOrderPlan returns a plan that keeps every one of n rows, in input
// order (one output group), with zero scores if scores.
func inputOrderPlan(n int, scores bool) *Plan {
	rows := make([]int32, n)
	keep := make([]bool, n)
	for i := range rows {
		rows[i], keep[i] = int32(i), true
	}
	p := &Plan{Groups: Groups{Off: []int32{0, int32(n)}, Rows: rows}, Keep: keep}
	if scores {
		p.Score = make([]float32, n)
	}
	return p
}

// runsOfTasks groups the runs of runs by the task of their rows (tasks and
// runs in first-appearance order); a run spanning two tasks is an error.
func runsOfTasks(fn string, in *Input, runs Groups) (Groups, error) {
	taskOf := in.Tasks.IDOf(in.N())
	runTask := make([]int32, runs.Len())
	for r := range runTask {
		rows := runs.Group(r)
		runTask[r] = taskOf[rows[0]]
		for _, row := range rows {
			if taskOf[row] != runTask[r] {
				return Groups{}, errorf(fn, "run %d spans two task groups (rows %d and %d)", r, rows[0], row)
			}
		}
	}
	g, err := GroupByIDs(runTask, in.Tasks.Len())
	if err != nil {
		return Groups{}, errorf(fn, "runs do not nest in tasks: %v", err)
	}
	return g, nil
}
