package advantage

import (
	"math"

	"github.com/rftpipe/rftpipe/stages/args"
)

// OPMD is the pipeline-side opmd fn: advantage = reward − baseline, the
// baseline being the group mean or tau·(logsumexp(R/tau) − ln n).
type OPMD struct {
	LogAvgExp bool
	Tau       float64
	Singleton SingletonPolicy
}

func opmdSpec() Spec {
	return Spec{
		Name:   "opmd",
		Doc:    "reward minus the group baseline (mean or log-avg-exp)",
		Params: args.Schema{paramOPMDBaseline, paramTau, paramSingleton},
		New: PipelineCtor(func(a args.Values) (PipelineFn, error) {
			return &OPMD{LogAvgExp: a.String("opmd_baseline") == "logavgexp", Tau: a.Float("tau"), Singleton: singleton(a)}, nil
		}),
	}
}

// Plan implements PipelineFn. Metrics: group_advantages/{group_baseline,reward_mean}/*.
func (f *OPMD) Plan(in *Input) (*Plan, error) {
	if err := checkInput("opmd", in); err != nil {
		return nil, err
	}
	return planGroups(in, &opmdRule{logAvgExp: f.LogAvgExp, tau: f.Tau, prec: prec32}, f.Singleton)
}

// opmdRule is the OPMD group rule, shared with opmd_verl.
type opmdRule struct {
	logAvgExp bool
	tau       float64
	prec      precision
}

func (r *opmdRule) metricNames() []string { return []string{"group_baseline", "reward_mean"} }

func (r *opmdRule) apply(g *group) (bool, error) {
	n := len(g.v)
	mean := r.prec.round(r.prec.mean(g.v))
	baseline := 0.0
	switch {
	case n == 1:
	case r.logAvgExp:
		// tau · (logsumexp(R/tau) − ln n), max-shifted for stability.
		mx := math.Inf(-1)
		for _, x := range g.v {
			mx = math.Max(mx, r.prec.round(x)/r.tau)
		}
		s := 0.0
		for _, x := range g.v {
			s += math.Exp(r.prec.round(x)/r.tau - mx)
		}
		baseline = r.prec.round(r.tau * (mx + math.Log(s) - math.Log(float64(n))))
	default:
		baseline = mean
	}
	g.met[0], g.met[1] = baseline, mean
	for i, x := range g.v {
		g.score[i] = r.prec.sub(x, baseline)
	}
	return true, nil
}
