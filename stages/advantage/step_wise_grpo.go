package advantage

import (
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
)

// StepWiseGRPO is the pipeline-side step_wise_grpo fn: GRPO over the reward
// of the last step of each run of a task, broadcast to every step of the run.
type StepWiseGRPO struct {
	// GRPO holds epsilon, std_threshold, std_cal_level and the singleton
	// policy (rank penalty, duplication and Dr.GRPO do not apply).
	GRPO GRPO
	// StepNorm divides each run's score by its number of experiences.
	StepNorm bool
	// LastByStep takes the run's experience with the largest eid.step as its
	// last step and orders the run by step (Q-28 fix); upstream takes the
	// last one in input order.
	LastByStep bool
}

func stepWiseGRPOSpec() Spec {
	return Spec{
		Name: "step_wise_grpo",
		Doc:  "GRPO over the last-step reward of each run, broadcast to every step of the run",
		Params: args.Schema{
			paramEpsilon,
			param("enable_step_norm", args.Bool, false, "divide by the number of steps of the run"),
			paramStdCal, paramStdThreshold,
			flag("last_by_eid_step", "Q-28 fix: last step = largest eid.step, runs ordered by step"),
			paramSingleton,
		},
		New: PipelineCtor(func(a args.Values) (PipelineFn, error) {
			f := &StepWiseGRPO{
				GRPO: GRPO{
					Epsilon:   a.Float("epsilon"),
					BatchStd:  a.String("std_cal_level") == "batch",
					Singleton: singleton(a),
				},
				StepNorm:   a.Bool("enable_step_norm"),
				LastByStep: a.Bool("last_by_eid_step"),
			}
			if t, ok := a.OptFloat("std_threshold"); ok {
				f.GRPO.StdThreshold = &t
			}
			return f, nil
		}),
	}
}

// Plan implements PipelineFn. The output groups are the tasks, each ordered
// run by run. Metrics: group_advantages/reward_{mean,std}/* (one entry per
// task, skipped ones included), experience_count, filtered_count,
// skipped_group_ratio; empty input gives no metrics.
func (f *StepWiseGRPO) Plan(in *Input) (*Plan, error) {
	const fn = "step_wise_grpo"
	if err := checkInput(fn, in); err != nil {
		return nil, err
	}
	p := newPlan(in, true)
	p.Metrics = agg.Metrics{}
	if in.N() == 0 {
		return p, nil
	}
	if err := in.Runs.check("rid", in.N()); err != nil {
		return nil, errorf(fn, "%v", err)
	}
	if f.LastByStep && len(in.Step) != in.N() {
		return nil, errorf(fn, "last_by_eid_step needs eid.step of every row (%d of %d)", len(in.Step), in.N())
	}
	runs := in.Runs
	if f.LastByStep {
		runs = sortRunsByStep(runs, in.Step)
	}
	// The runs of each task, in first-appearance order: a run belongs to the
	// task of its first row, and global first appearance restricted to one
	// task is first appearance inside it.
	taskRuns, err := runsOfTasks(fn, in, runs)
	if err != nil {
		return nil, err
	}
	last := make([]float64, runs.Len())
	for r := range last {
		rows := runs.Group(r)
		last[r] = in.Reward[rows[len(rows)-1]]
	}

	runScore := make([]float64, runs.Len())
	runKeep := make([]bool, runs.Len())
	gat := agg.NewGatherer("reward_mean", "reward_std")
	out := groupOut[float64]{score: runScore, keep: runKeep, gather: gat}
	if err := runGroups(taskRuns, last, f.GRPO.rule(prec32, last), f.GRPO.Singleton, &out); err != nil {
		return nil, err
	}

	f.broadcast(p, runs, taskRuns, runScore, runKeep)
	p.Metrics = gat.Metrics("group_advantages")
	p.Metrics["experience_count"] = float64(in.N() - p.Filtered)
	p.Metrics["filtered_count"] = float64(p.Filtered)
	p.Metrics["skipped_group_ratio"] = float64(out.dropped) / float64(in.Tasks.Len())
	p.Weights = gat.Weights("group_advantages")
	p.Weights["skipped_group_ratio"] = float64(in.Tasks.Len())
	return p, nil
}

// broadcast gives each row its run's score (divided by the run's rows with
// StepNorm), or its run's drop reason, and sets p's groups: per task, its
// runs' rows run by run.
func (f *StepWiseGRPO) broadcast(p *Plan, runs, taskRuns Groups, runScore []float64, runKeep []bool) {
	off := make([]int32, 1, taskRuns.Len()+1)
	order := make([]int32, 0, len(runs.Rows))
	for t := 0; t < taskRuns.Len(); t++ {
		for _, r := range taskRuns.Group(t) {
			rows := runs.Group(int(r))
			order = append(order, rows...)
			if !runKeep[r] {
				p.Filtered += len(rows)
				why := reasonStdBelow
				if len(taskRuns.Group(t)) == 1 {
					why = reasonSingleton
				}
				for _, row := range rows {
					p.Reason[row] = why
				}
				continue
			}
			s := runScore[r]
			if f.StepNorm {
				s /= float64(len(rows))
			}
			for _, row := range rows {
				p.Keep[row] = true
				p.Score[row] = float32(s)
			}
		}
		off = append(off, int32(len(order)))
	}
	p.Groups = Groups{Off: off, Rows: order}
}

// sortRunsByStep returns runs with the rows of each run stably sorted by step.
func sortRunsByStep(runs Groups, step []int64) Groups {
	rows := append([]int32(nil), runs.Rows...)
	for g := 0; g < runs.Len(); g++ {
		r := rows[runs.Off[g]:runs.Off[g+1]]
		for i := 1; i < len(r); i++ {
			for j := i; j > 0 && step[r[j]] < step[r[j-1]]; j-- {
				r[j], r[j-1] = r[j-1], r[j]
			}
		}
	}
	return Groups{Off: runs.Off, Rows: rows}
}
