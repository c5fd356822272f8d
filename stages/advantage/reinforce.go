package advantage

import "github.com/rftpipe/rftpipe/stages/args"

// Reinforce is the pipeline-side reinforce fn: advantage = float32(reward),
// no baseline; the group mean is only reported.
type Reinforce struct{}

func reinforceSpec() Spec {
	return Spec{
		Name: "reinforce",
		Doc:  "advantage = reward (no baseline); reports the group mean",
		New:  PipelineCtor(func(args.Values) (PipelineFn, error) { return Reinforce{}, nil }),
	}
}

// Plan implements PipelineFn. Metrics: group_advantages/reward_mean/*.
func (Reinforce) Plan(in *Input) (*Plan, error) {
	if err := checkInput("reinforce", in); err != nil {
		return nil, err
	}
	return planGroups(in, reinforceRule{}, SingletonUpstream)
}

type reinforceRule struct{}

func (reinforceRule) metricNames() []string { return []string{"reward_mean"} }

func (reinforceRule) apply(g *group) (bool, error) {
	g.met[0] = prec32.round(prec32.mean(g.v))
	for i, x := range g.v {
		g.score[i] = prec32.round(x)
	}
	return true, nil
}
