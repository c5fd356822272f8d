package advantage

import "github.com/rftpipe/rftpipe/stages/args"

// ASYMRE is the pipeline-side asymre fn: advantage = reward − (group mean +
// baseline_shift); singleton groups use baseline 0.
type ASYMRE struct {
	BaselineShift float64
	// TrueRewardMean reports the group's real mean reward as reward_mean
	// (Q-11 fix); upstream reports baseline − shift, wrong for singletons.
	TrueRewardMean bool
	Singleton      SingletonPolicy
}

func asymreSpec() Spec {
	return Spec{
		Name: "asymre",
		Doc:  "reward minus (group mean + baseline_shift)",
		Params: args.Schema{paramBaselineShift,
			flag("true_reward_mean", "Q-11 fix: report the real group mean as reward_mean"),
			paramSingleton},
		New: PipelineCtor(func(a args.Values) (PipelineFn, error) {
			return &ASYMRE{BaselineShift: a.Float("baseline_shift"), TrueRewardMean: a.Bool("true_reward_mean"), Singleton: singleton(a)}, nil
		}),
	}
}

// Plan implements PipelineFn. Metrics: group_advantages/{group_baseline,reward_mean}/*.
func (f *ASYMRE) Plan(in *Input) (*Plan, error) {
	if err := checkInput("asymre", in); err != nil {
		return nil, err
	}
	return planGroups(in, &asymreRule{shift: f.BaselineShift, trueMean: f.TrueRewardMean, prec: prec32}, f.Singleton)
}

// asymreRule is the AsymRE group rule, shared with asymre_verl.
type asymreRule struct {
	shift    float64
	trueMean bool
	prec     precision
}

func (r *asymreRule) metricNames() []string { return []string{"group_baseline", "reward_mean"} }

func (r *asymreRule) apply(g *group) (bool, error) {
	baseline := 0.0
	mean := r.prec.round(r.prec.mean(g.v))
	if len(g.v) > 1 {
		baseline = r.prec.round(mean + r.prec.round(r.shift))
	}
	g.met[0], g.met[1] = baseline, baseline-r.shift
	if r.trueMean {
		g.met[1] = mean
	}
	for i, x := range g.v {
		g.score[i] = r.prec.sub(x, baseline)
	}
	return true, nil
}
