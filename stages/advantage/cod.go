package advantage

import (
	"math"
	"strconv"

	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
)

// CoDInfo is what cod's iterative mode reads of one row: its eid.task and
// eid.run, its action-mask length, and the info fields CoD's workflow
// writes.
type CoDInfo struct {
	// Experiment is the row's experiment ("" for a store without one): no
	// key of cod's spans experiments.
	Experiment string
	Task       string // str(eid.task)
	Run        int64  // eid.run
	// RespLen is Σ action_mask.
	RespLen float64
	// Type is info.exp_type ("solve_task" or "gen_hint"); Idx is
	// info.task_idx (solve_task) or info.hint_idx (gen_hint).
	Type string
	Idx  int64
	// TaskRewards is info.task_rewards.
	TaskRewards []float64
	// TasksetID is str(info.taskset_id).
	TasksetID string
	// Judge: info.judge_format_error or info.judge_format_error_in_trajectory.
	Judge bool
}

// CoD is the pipeline-side cod fn (Trinity 0.6 line, CoDAdvantageFn). In the
// standard mode it is step_wise_grpo (std_cal_level "none": no scaling) with
// the 0.6 line's metrics; in the iterative mode it drops judge-flagged
// rows, scores every row by its causal rewards-to-go against a per-key
// run-mean baseline and re-weights the scores by a temperature.
type CoD struct {
	// Standard is the step_wise_grpo of the standard mode.
	Standard StepWiseGRPO
	// Iterative selects the iterative mode (iterative_hint_e2e_causal).
	Iterative bool
	// Style is e2e_causal_returns_style; Window and Gamma its parameters.
	Style  string
	Window int64
	Gamma  float64
	// Temp is red_weight_temp (0: none); AdaptiveTemp the bisection search.
	Temp         float64
	AdaptiveTemp bool
	// Level is red_weight_adaptive_level: "task", "taskset" or "" (one group).
	Level string
	// Shift is red_weight_adv_shift.
	Shift bool
}

func codSpec() Spec {
	str := func(name string, def any, doc string) args.Param { return param(name, args.String, def, doc) }
	return Spec{
		Name: "cod",
		Doc:  "CoD (connect-the-dots): step-wise GRPO, or causal rewards-to-go with temperature re-weighting (iterative mode)",
		Params: args.Schema{
			paramEpsilon,
			param("enable_step_norm", args.Bool, false, "standard mode: divide by the number of steps of the run"),
			{Name: "std_cal_level", Kind: args.String, Ctor: "group", Default: "group", InDefaults: true,
				Choices: []string{"group", "batch", "none"}, Doc: "standard mode: std of the group, of the batch, or none (reward − mean)"},
			paramStdThreshold,
			param("iterative_hint_e2e_causal", args.Bool, false, "the iterative mode (CoD meta-trajectories)"),
			str("e2e_causal_returns_style", "mean", "mean | sliding_window_mean | discounted"),
			param("e2e_causal_returns_window", args.Int, int64(-1), "window of sliding_window_mean"),
			param("e2e_causal_returns_gamma", args.Float, 1.0, "discount of discounted"),
			str("e2e_causal_baseline", "group-mean", "baseline (only group-mean)"),
			param("mask_format_issue_exp", args.Bool, false, "deprecated upstream; no effect"),
			param("red_weight_temp", args.Float, nil, "fixed re-weighting temperature: score·exp(score/temp)"),
			param("red_weight_adaptive_temp", args.Bool, false, "search the temperature that makes the length-weighted sum non-negative"),
			str("red_weight_adaptive_version", nil, "the search (only bisection)"),
			str("red_weight_adaptive_level", nil, "re-weighting groups: task | taskset | null (all rows)"),
			param("red_weight_adv_shift", args.Bool, false, "shift negative-mean groups to mean 0"),
		},
		New: PipelineCtor(func(a args.Values) (PipelineFn, error) {
			level := a.String("std_cal_level")
			f := &CoD{
				Standard: StepWiseGRPO{
					GRPO:     GRPO{Epsilon: a.Float("epsilon"), BatchStd: level == "batch", DrGRPO: level == "none"},
					StepNorm: a.Bool("enable_step_norm"),
				},
				Iterative:    a.Bool("iterative_hint_e2e_causal"),
				Style:        a.String("e2e_causal_returns_style"),
				Window:       a.Int("e2e_causal_returns_window"),
				Gamma:        a.Float("e2e_causal_returns_gamma"),
				Temp:         a.Float("red_weight_temp"),
				AdaptiveTemp: a.Bool("red_weight_adaptive_temp"),
				Level:        a.String("red_weight_adaptive_level"),
				Shift:        a.Bool("red_weight_adv_shift"),
			}
			if t, ok := a.OptFloat("std_threshold"); ok {
				f.Standard.GRPO.StdThreshold = &t
			}
			if !f.Iterative {
				return f, nil
			}
			switch {
			case f.Style != "mean" && f.Style != "sliding_window_mean" && f.Style != "discounted":
				return nil, errorf("cod", "Invalid e2e_causal_returns_style: %s", f.Style)
			case f.Style == "sliding_window_mean" && f.Window < 1:
				return nil, errorf("cod", "e2e_causal_returns_window must be >= 1 (have %d)", f.Window)
			case f.Style == "discounted" && !(f.Gamma >= 0 && f.Gamma <= 1):
				return nil, errorf("cod", "e2e_causal_returns_gamma must be in [0, 1] (have %v)", f.Gamma)
			case a.String("e2e_causal_baseline") != "group-mean":
				return nil, errorf("cod", "Invalid e2e_causal_baseline: %s", a.String("e2e_causal_baseline"))
			case f.AdaptiveTemp && a.String("red_weight_adaptive_version") != "bisection":
				return nil, errorf("cod", "Invalid red_weight_adaptive_version: %v", a["red_weight_adaptive_version"])
			case !f.AdaptiveTemp && f.Temp < 0:
				return nil, errorf("cod", "red_weight_temp must be positive (have %v)", f.Temp)
			}
			return f, nil
		}),
	}
}

// Needs implements Needer: runs (standard mode), or the CoD info.
func (f *CoD) Needs() Needs {
	if f.Iterative {
		return Needs{CoD: true}
	}
	return f.Standard.Needs()
}

// CrossBatch implements CrossBatcher.
func (f *CoD) CrossBatch() string {
	switch {
	case f.Iterative && f.Level != "task":
		return "cod re-weights the scores of every batch of the input together (red_weight_adaptive_level " + strconv.Quote(f.Level) + ")"
	case !f.Iterative && f.Standard.GRPO.BatchStd:
		return "std_cal_level=batch takes the std over every run of the input"
	}
	return ""
}

// Plan implements PipelineFn.
func (f *CoD) Plan(in *Input) (*Plan, error) {
	if f.Iterative {
		return f.iterative(in)
	}
	return f.standard(in)
}

// standard is step_wise_grpo with the 0.6 line's per-task metrics: the mean
// of the runs' last rewards (a single run: its reward) and their unbiased
// std (a single run: NaN), a NaN propagating.
func (f *CoD) standard(in *Input) (*Plan, error) {
	p, err := f.Standard.Plan(in)
	if err != nil || in.N() == 0 {
		return p, err
	}
	taskRuns, err := runsOfTasks("cod", in, in.Runs)
	if err != nil {
		return nil, err
	}
	var means, stds, last []float64
	for t := 0; t < taskRuns.Len(); t++ {
		last = last[:0]
		for _, r := range taskRuns.Group(t) {
			rows := in.Runs.Group(int(r))
			last = append(last, in.Reward[rows[len(rows)-1]])
		}
		m, s := prec32.meanStd(last)
		means, stds = append(means, m), append(stds, s)
	}
	for _, k := range []string{"reward_mean", "reward_std"} {
		for _, s := range []string{"mean", "max", "min"} {
			delete(p.Metrics, "group_advantages/"+k+"/"+s)
		}
	}
	p.Metrics.Summarize("group_advantages", "reward_mean", means)
	p.Metrics.Summarize("group_advantages", "reward_std", stds)
	p.Weights = agg.Metrics{"skipped_group_ratio": float64(in.Tasks.Len())}
	return p, nil
}

// iterative is the iterative mode (advantages.md §cod).
func (f *CoD) iterative(in *Input) (*Plan, error) {
	const fn = "cod"
	n := in.N()
	if len(in.CoD) != n {
		return nil, errorf(fn, "iterative mode needs the CoD info of every row (%d of %d)", len(in.CoD), n)
	}
	p := &Plan{Keep: make([]bool, n), Reason: make([]uint8, n), Score: make([]float32, n), Return: make([]float32, n)}
	p.Metrics = agg.Metrics{"experience_count": float64(n)}
	retNorm, score, err := f.baselined(in, p)
	if err != nil {
		return nil, err
	}
	f.reweight(in, p, f.reweightGroups(in), score, retNorm)
	return p, nil
}

// baselined drops the judge-flagged rows from p and returns, per kept row,
// its rewards-to-go statistic (returnsNorm) and its score: that statistic
// less the mean over the runs of its key (task, type and index; each run
// counted once, by its first row).
func (f *CoD) baselined(in *Input, p *Plan) (retNorm, score []float64, err error) {
	n := in.N()
	retNorm = make([]float64, n)
	keys := map[string]int{}
	keyOf := make([]int, n)
	// Per key, the returns_norm of each run (the run's first row), in
	// first-appearance order.
	type runs struct {
		seen map[int64]bool
		v    []float64
	}
	var record []runs
	for r := range in.CoD {
		c := &in.CoD[r]
		if c.Judge {
			p.Filtered++
			p.Reason[r] = reasonJudgeFlagged
			continue
		}
		p.Keep[r] = true
		g, err := turnRewards(r, c, in.Reward[r])
		if err != nil {
			return nil, nil, err
		}
		retNorm[r] = f.returnsNorm(g)
		key := c.inExperiment(c.Task + "_" + c.Type + "_" + strconv.FormatInt(c.Idx, 10))
		k, ok := keys[key]
		if !ok {
			k = len(record)
			keys[key] = k
			record = append(record, runs{seen: map[int64]bool{}})
		}
		keyOf[r] = k
		if rec := &record[k]; !rec.seen[c.Run] {
			rec.seen[c.Run] = true
			rec.v = append(rec.v, retNorm[r])
		}
	}
	p.Metrics["judge_format_error_count"] = float64(p.Filtered)
	baseline := make([]float64, len(record))
	for k, rec := range record {
		baseline[k] = float64(float32(prec32.mean(rec.v)))
	}
	score = make([]float64, n)
	for r := range score {
		if p.Keep[r] {
			score[r] = retNorm[r] - baseline[keyOf[r]]
		}
	}
	return retNorm, score, nil
}

// turnRewards returns the rewards from row r's turn on: a solve_task row's
// task rewards from its task index, a gen_hint row's own reward followed
// by the task rewards after its hint index.
func turnRewards(r int, c *CoDInfo, reward float64) ([]float64, error) {
	const fn = "cod"
	switch c.Type {
	case "solve_task":
		if c.Idx < 0 || c.Idx > int64(len(c.TaskRewards)) {
			return nil, errorf(fn, "row %d: task_idx %d out of range of task_rewards (%d)", r, c.Idx, len(c.TaskRewards))
		}
		return c.TaskRewards[c.Idx:], nil
	case "gen_hint":
		if c.Idx < -1 || c.Idx+1 > int64(len(c.TaskRewards)) {
			return nil, errorf(fn, "row %d: hint_idx %d out of range of task_rewards (%d)", r, c.Idx, len(c.TaskRewards))
		}
		return append([]float64{reward}, c.TaskRewards[c.Idx+1:]...), nil
	default:
		return nil, errorf(fn, "Invalid exp_type %s, something went wrong.", c.Type)
	}
}

// inExperiment returns key k within the row's experiment, unambiguous as
// schema.AppendKey's: the experiment's length, ':', the experiment, '/', k.
func (c *CoDInfo) inExperiment(k string) string {
	return strconv.Itoa(len(c.Experiment)) + ":" + c.Experiment + "/" + k
}

// reweightGroups returns the re-weighting groups (Level), in output order.
func (f *CoD) reweightGroups(in *Input) Groups {
	n := in.N()
	switch f.Level {
	case "task":
		return in.Tasks
	case "taskset":
		ids := make([]string, n)
		for r := range ids {
			ids[r] = in.CoD[r].inExperiment(in.CoD[r].TasksetID)
		}
		return GroupBy(ids)
	default:
		return inputOrderPlan(n, false).Groups
	}
}

// reweight sets p's scores and returns group by group: each kept row's
// score re-weighted by the group's temperature and shifted up by a
// negative length-weighted mean (Shift); p's groups are the kept rows of
// groups, in order.
func (f *CoD) reweight(in *Input, p *Plan, groups Groups, score, retNorm []float64) {
	var order []int32
	off := []int32{0}
	temps, nTemps := 0.0, 0
	for g := 0; g < groups.Len(); g++ {
		var rows []int32
		for _, r := range groups.Group(g) {
			if p.Keep[r] {
				rows = append(rows, r)
			}
		}
		order = append(order, rows...)
		off = append(off, int32(len(order)))
		temp := f.temperature(rows, score, in.CoD)
		if !math.IsNaN(temp) {
			temps += temp
			nTemps++
		}
		shift := 0.0
		if f.Shift {
			var num, den float32
			for _, r := range rows {
				num += float32(score[r]) * float32(in.CoD[r].RespLen)
				den += float32(in.CoD[r].RespLen)
			}
			shift = float64(num / den)
		}
		for _, r := range rows {
			s := score[r]
			if !math.IsNaN(temp) && temp != 0 {
				s *= math.Exp(s / temp)
			}
			if shift < 0 {
				s -= shift
			}
			p.Score[r] = float32(s)
			p.Return[r] = float32(retNorm[r])
		}
	}
	p.Groups = Groups{Off: off, Rows: order}
	p.Metrics["active_weight_temp_mean"] = 0
	if nTemps > 0 {
		p.Metrics["active_weight_temp_mean"] = temps / float64(nTemps)
	}
}

// returnsNorm is the causal rewards-to-go statistic of the rewards g.
func (f *CoD) returnsNorm(g []float64) float64 {
	switch f.Style {
	case "sliding_window_mean":
		g = g[:min(int(f.Window), len(g))]
	case "discounted":
		var s float32
		for j, x := range g {
			s += float32(x) * float32(math.Pow(f.Gamma, float64(j)))
		}
		return float64(s)
	}
	if len(g) == 0 {
		return math.NaN()
	}
	return float64(float32(prec32.mean(g)))
}

// temperature returns the re-weighting temperature of a group: the fixed
// one, or the bisection's last midpoint when the length-weighted sum of the
// scores is negative; NaN for none.
func (f *CoD) temperature(rows []int32, score []float64, info []CoDInfo) float64 {
	if !f.AdaptiveTemp {
		if f.Temp == 0 {
			return math.NaN()
		}
		return f.Temp
	}
	sum := func(temp float64) float64 {
		s := 0.0
		for _, r := range rows {
			x := score[r]
			if !math.IsNaN(temp) {
				x *= math.Exp(x / temp)
			}
			s += x * info[r].RespLen
		}
		return s
	}
	if !(sum(math.NaN()) < 0) {
		return math.NaN()
	}
	lo, hi, mid := 0.8, 100.0, 0.0
	for i := 0; i < 20; i++ {
		mid = (lo + hi) / 2
		if sum(mid) < 0 {
			hi = mid
		} else {
			lo = mid
		}
		if hi-lo < 0.05 {
			break
		}
	}
	return mid
}
