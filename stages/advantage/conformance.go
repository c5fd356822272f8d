package advantage

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/conformance"
)

// GoldenEID is an experience id of a golden case. Batch and Task keep the
// string rendering of the JSON value (an integer or a string).
type GoldenEID struct {
	Batch, Task IDPart
	Run, Step   int64
}

// IDPart is an id part rendered as a string, decoded from a JSON integer or string.
type IDPart string

// UnmarshalJSON implements json.Unmarshaler.
func (p *IDPart) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*p = IDPart(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	*p = IDPart(n.String())
	return nil
}

// TID returns "batch/task".
func (e GoldenEID) TID() string { return TID(string(e.Batch), string(e.Task)) }

// RID returns "batch/task/run".
func (e GoldenEID) RID() string { return RID(string(e.Batch), string(e.Task), e.Run) }

// String renders the full id for messages.
func (e GoldenEID) String() string {
	return fmt.Sprintf("%s/%s/%d/%d", e.Batch, e.Task, e.Run, e.Step)
}

// GoldenExperience is one input experience of an advantage or add_strategy case.
type GoldenExperience struct {
	EID               GoldenEID           `json:"eid"`
	Reward            *conformance.Float  `json:"reward"`
	ActionMask        []float64           `json:"action_mask"`
	OldLogprob        []conformance.Float `json:"old_logprob"`
	TeacherLogprob    []conformance.Float `json:"teacher_logprob"`
	TokenLevelRewards []conformance.Float `json:"token_level_rewards"`
	Values            []conformance.Float `json:"values"`
	Entropy           []conformance.Float `json:"entropy"`
	Necs              []conformance.Float `json:"necs"`
	RewardBaseline    *conformance.Float  `json:"reward_baseline"`
	// Info is the experience's info object (gigpo, cod).
	Info map[string]json.RawMessage `json:"info"`
	// RewardComponents are gdpo's K rewards ("nan" = none).
	RewardComponents []conformance.Float `json:"reward_components"`
}

// DecodeGolden decodes inputs.experiences of a case.
func DecodeGolden(c *conformance.Case) ([]GoldenExperience, error) {
	var exps []GoldenExperience
	if err := json.Unmarshal(c.Inputs["experiences"], &exps); err != nil {
		return nil, fmt.Errorf("%s: inputs.experiences: %w", c.Name, err)
	}
	return exps, nil
}

// GoldenArgs decodes the args of a case (stages/args' JSON decoding).
func GoldenArgs(c *conformance.Case) (map[string]any, error) {
	v, err := args.FromJSON(c.Args)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Name, err)
	}
	return v, nil
}

// GoldenInput builds the pipeline Input of golden experiences: a missing
// reward is NaN, LogprobMean is the mean over all positions of old_logprob.
func GoldenInput(exps []GoldenExperience, seed uint64) *Input {
	in := &Input{Reward: make([]float64, len(exps)), Step: make([]int64, len(exps)), Seed: seed}
	tids := make([]string, len(exps))
	rids := make([]string, len(exps))
	for i, e := range exps {
		tids[i], rids[i] = e.EID.TID(), e.EID.RID()
		in.Step[i] = e.EID.Step
		in.Reward[i] = nanIfNil(e.Reward)
		if len(e.OldLogprob) > 0 {
			if in.LogprobMean == nil {
				in.LogprobMean = make([]float64, len(exps))
			}
			s := 0.0
			for _, x := range e.OldLogprob {
				s += float64(x)
			}
			in.LogprobMean[i] = s / float64(len(e.OldLogprob))
		}
	}
	in.Tasks, in.Runs = GroupBy(tids), GroupBy(rids)
	return in
}

// stepReward is upstream's float(info[step_reward_key]) of a JSON value: a
// number, "nan"/"inf" as conformance writes them, a boolean as 1 or 0; null
// raises (TypeError) as any other value does.
func stepReward(raw json.RawMessage) (float64, error) {
	switch strings.TrimSpace(string(raw)) {
	case "true":
		return 1, nil
	case "false":
		return 0, nil
	case "null":
		return 0, errors.New("null is not a number (upstream: float(None) raises TypeError)")
	}
	var f conformance.Float
	if err := json.Unmarshal(raw, &f); err != nil {
		return 0, fmt.Errorf("%s is not a number", raw)
	}
	return float64(f), nil
}

// GoldenNeeds fills the Input fields that fns read from info and from the
// reward components, as the group pass does from a store.
func GoldenNeeds(in *Input, exps []GoldenExperience, n Needs) error {
	if n.StepReward != "" {
		in.StepReward, in.HasStepReward = make([]float64, len(exps)), make([]bool, len(exps))
		for i, e := range exps {
			in.StepReward[i] = math.NaN()
			if raw, ok := e.Info[n.StepReward]; ok {
				f, err := stepReward(raw)
				if err != nil {
					return fmt.Errorf("experience %d: info.%s: %w", i, n.StepReward, err)
				}
				in.StepReward[i], in.HasStepReward[i] = f, true
			}
		}
	}
	if n.Anchor != "" {
		keys := make([]string, len(exps))
		has := make([]bool, len(exps))
		for i, e := range exps {
			raw, ok := e.Info[n.Anchor]
			if !ok || string(raw) == "null" {
				continue
			}
			var v any
			d := json.NewDecoder(strings.NewReader(string(raw)))
			d.UseNumber()
			if err := d.Decode(&v); err != nil {
				return fmt.Errorf("experience %d: info.%s: %w", i, n.Anchor, err)
			}
			keys[i], has[i] = fmt.Sprint(v), true
		}
		in.Anchor = AnchorIDs(keys, has)
	}
	if n.Components {
		for i, e := range exps {
			for k, c := range e.RewardComponents {
				if k == len(in.Components) {
					in.Components = append(in.Components, make([]float64, len(exps)))
				}
				in.Components[k][i] = float64(c)
			}
		}
	}
	if n.CoD {
		in.CoD = make([]CoDInfo, len(exps))
		for i, e := range exps {
			var info struct {
				ExpType     string              `json:"exp_type"`
				TaskIdx     *int64              `json:"task_idx"`
				HintIdx     *int64              `json:"hint_idx"`
				TaskRewards []conformance.Float `json:"task_rewards"`
				TasksetID   json.RawMessage     `json:"taskset_id"`
				Judge       bool                `json:"judge_format_error"`
				JudgeTraj   bool                `json:"judge_format_error_in_trajectory"`
			}
			b, _ := json.Marshal(e.Info)
			if err := json.Unmarshal(b, &info); err != nil {
				return fmt.Errorf("experience %d: info: %w", i, err)
			}
			c := CoDInfo{Task: string(e.EID.Task), Run: e.EID.Run, Type: info.ExpType, TaskRewards: floats(info.TaskRewards),
				TasksetID: strings.Trim(string(info.TasksetID), `"`), Judge: info.Judge || info.JudgeTraj}
			for _, m := range e.ActionMask {
				c.RespLen += m
			}
			switch {
			case info.TaskIdx != nil && info.ExpType == "solve_task":
				c.Idx = *info.TaskIdx
			case info.HintIdx != nil:
				c.Idx = *info.HintIdx
			}
			in.CoD[i] = c
		}
	}
	return nil
}

func nanIfNil(f *conformance.Float) float64 {
	if f == nil {
		return math.NaN()
	}
	return float64(*f)
}

// GoldenRow is one output row as the golden files write it.
type GoldenRow struct {
	EID        GoldenEID           `json:"eid"`
	Advantages []conformance.Float `json:"advantages"`
	Returns    []conformance.Float `json:"returns"`
	ActionMask []float64           `json:"action_mask"`
	// Random cases (rec drop="balance").
	MayBeDropped     bool                `json:"may_be_dropped"`
	AdvantagesIfKept []conformance.Float `json:"advantages_if_kept"`
	// ReturnsNorm is cod's iterative returns scalar.
	ReturnsNorm *conformance.Float `json:"returns_norm"`
}

// GotRow is one output row of ours.
type GotRow struct {
	EID        GoldenEID
	Advantages []float64 // nil: no advantage computed
	Returns    []float64
	ActionMask []float64 // nil: not compared
	// ReturnsNorm is the returns scalar of a plan with Return (NaN: none).
	ReturnsNorm float64
}

// CheckRows compares output rows with golden ones, in order.
func CheckRows(chk *conformance.Checker, field string, got []GotRow, want []GoldenRow) {
	if len(got) != len(want) {
		chk.Failf(field+" count", strconv.Itoa(len(got)), strconv.Itoa(len(want)))
		return
	}
	for i, w := range want {
		g := got[i]
		f := fmt.Sprintf("%s[%d]", field, i)
		if g.EID != w.EID {
			chk.Failf(f+".eid", g.EID.String(), w.EID.String())
			continue
		}
		if (g.Advantages == nil) != (w.Advantages == nil) {
			chk.Failf(f+".advantages", fmt.Sprint(g.Advantages), fmt.Sprint(floats(w.Advantages)))
			continue
		}
		chk.Vector(f+".advantages", g.Advantages, floats(w.Advantages))
		chk.Vector(f+".returns", g.Returns, floats(w.Returns))
		if w.ActionMask != nil {
			chk.Vector(f+".action_mask", g.ActionMask, w.ActionMask)
		}
		if w.ReturnsNorm != nil {
			chk.Scalar(f+".returns_norm", g.ReturnsNorm, float64(*w.ReturnsNorm))
		}
	}
}

func floats(fs []conformance.Float) []float64 {
	if fs == nil {
		return nil
	}
	out := make([]float64, len(fs))
	for i, f := range fs {
		out[i] = float64(f)
	}
	return out
}

// PlanRows renders output rows out of plan p over golden experiences:
// advantages = returns = Score × action_mask (nil without scores), duplicate
// copies with eid.task shifted by their block's TaskOffset (integer tasks).
func PlanRows(p *Plan, out []OutRow, exps []GoldenExperience) ([]GotRow, error) {
	rows := make([]GotRow, 0, len(out))
	for _, o := range out {
		e := exps[o.Row]
		r := GotRow{EID: e.EID, ReturnsNorm: math.NaN()}
		if o.Dup >= 0 && p.Dups[o.Dup].TaskOffset != 0 {
			t, err := strconv.ParseInt(string(e.EID.Task), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("duplicate of %s: task id is not an integer", e.EID)
			}
			r.EID.Task = IDPart(strconv.FormatInt(t+p.Dups[o.Dup].TaskOffset, 10))
		}
		if p.Score != nil {
			r.Advantages = make([]float64, len(e.ActionMask))
			for t, m := range e.ActionMask {
				r.Advantages[t] = float64(p.Score[o.Row]) * m
			}
			r.Returns = r.Advantages
		}
		if p.Return != nil {
			r.ReturnsNorm = float64(p.Return[o.Row])
			r.Returns = make([]float64, len(e.ActionMask))
			for t, m := range e.ActionMask {
				r.Returns[t] = r.ReturnsNorm * m
			}
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// ConformanceRunner returns the conformance runner of kind "advantage", over
// the fns of reg (Default() if nil).
func ConformanceRunner(reg *Registry) conformance.Runner {
	if reg == nil {
		reg = Default()
	}
	return func(c *conformance.Case, chk *conformance.Checker) error {
		spec, err := reg.Get(c.Fn)
		if err != nil {
			return err
		}
		exps, err := DecodeGolden(c)
		if err != nil {
			return err
		}
		args, err := GoldenArgs(c)
		if err != nil {
			return err
		}
		var want goldenWant
		if err := json.Unmarshal(c.Expected, &want); err != nil {
			return fmt.Errorf("%s: expected: %w", c.Name, err)
		}
		var got []GotRow
		var metrics agg.Metrics
		var plan *Plan
		if spec.New.Side() == TrainerSide {
			got, metrics, err = runTrainerCase(reg, c, args, exps)
		} else {
			got, plan, err = runPipelineCase(reg, c, chk, args, exps)
			if plan != nil {
				metrics = plan.Metrics
			}
		}
		if err != nil {
			return err
		}
		if want.Error != nil {
			return nil // the reference raised and we did not: RunFile reports it
		}
		return want.check(chk, c, exps, got, metrics, plan)
	}
}

// goldenWant is what an advantage case expects.
type goldenWant struct {
	Outputs       []GoldenRow            `json:"outputs"`
	OutputsPrefix []GoldenRow            `json:"outputs_prefix"`
	Metrics       json.RawMessage        `json:"metrics"`
	InputCount    *int                   `json:"input_count"`
	OutputCount   *int                   `json:"output_count"`
	FilteredCount *int                   `json:"filtered_count"`
	DupCount      *int                   `json:"duplicated_group_count"`
	DupCandidates []string               `json:"duplicate_candidates"`
	OutMin        *int                   `json:"output_count_min"`
	OutMax        *int                   `json:"output_count_max"`
	DroppedBy     map[string]int         `json:"dropped_count_by_group"`
	Error         *struct{ Type string } `json:"error"`
}

// runTrainerCase runs the case's trainer-side fn over its experiences as
// one batch and returns its rows and metrics.
func runTrainerCase(reg *Registry, c *conformance.Case, args map[string]any, exps []GoldenExperience) ([]GotRow, agg.Metrics, error) {
	fn, err := Trainer(reg, c.Fn, args)
	if err != nil {
		return nil, nil, err
	}
	res, err := fn.Compute(goldenBatch(exps))
	if err != nil {
		return nil, nil, err
	}
	return resultRows(res, exps, c.Fn == "clipb" || c.Fn == "clipv"), res.Metrics, nil
}

// runPipelineCase plans the case's pipeline-side fn over its experiences,
// checks each row's drop reason agrees with its keep (and gdpo's per-row
// values), and returns the output rows and the plan.
func runPipelineCase(reg *Registry, c *conformance.Case, chk *conformance.Checker, args map[string]any, exps []GoldenExperience) ([]GotRow, *Plan, error) {
	fn, err := Pipeline(reg, c.Fn, args)
	if err != nil {
		return nil, nil, err
	}
	in := GoldenInput(exps, 0)
	if err := GoldenNeeds(in, exps, NeedsOf(fn)); err != nil {
		return nil, nil, err
	}
	plan, err := fn.Plan(in)
	if err != nil {
		return nil, nil, err
	}
	for r, k := range plan.Keep {
		if why := plan.DropReason(r); plan.Reason != nil && k == (why != "") {
			chk.Failf(fmt.Sprintf("drop_reason[%d]", r), strconv.Quote(why), fmt.Sprintf("kept=%v", k))
		}
	}
	if g, ok := fn.(*GDPO); ok {
		if err := checkGDPO(chk, c, g, in, plan); err != nil {
			return nil, nil, err
		}
	}
	got, err := PlanRows(plan, plan.Output(), exps)
	if err != nil {
		return nil, nil, err
	}
	return got, plan, nil
}

// check checks a case's results against what it expects: metrics, counts
// and output rows (for a seeded case, its duplicates or balanced drops).
func (want *goldenWant) check(chk *conformance.Checker, c *conformance.Case, exps []GoldenExperience, got []GotRow, metrics agg.Metrics, plan *Plan) error {
	if want.Metrics != nil {
		if err := chk.MetricsJSON("metrics", metrics, want.Metrics); err != nil {
			return err
		}
	}
	if want.InputCount != nil {
		chk.Int("input_count", len(exps), *want.InputCount)
	}
	if want.OutputCount != nil {
		chk.Int("output_count", len(got), *want.OutputCount)
	}
	if want.FilteredCount != nil && plan != nil {
		chk.Int("filtered_count", plan.Filtered, *want.FilteredCount)
	}
	switch {
	case c.Random && want.OutputsPrefix != nil:
		checkDuplicates(chk, plan, exps, got, &want.OutputsPrefix, want.DupCount, want.DupCandidates, want.OutMin, want.OutMax)
	case c.Random && want.DroppedBy != nil:
		checkBalanceDrop(chk, got, want.Outputs, want.DroppedBy)
	default:
		CheckRows(chk, "outputs", got, want.Outputs)
	}
	return nil
}

// checkGDPO checks gdpo's per-row values: sequence_advantages (the plan's
// scores) and aggregated_rewards.
func checkGDPO(chk *conformance.Checker, c *conformance.Case, f *GDPO, in *Input, p *Plan) error {
	var want struct {
		Seq []conformance.Float `json:"sequence_advantages"`
		Agg []conformance.Float `json:"aggregated_rewards"`
	}
	if err := json.Unmarshal(c.Expected, &want); err != nil {
		return fmt.Errorf("%s: expected: %w", c.Name, err)
	}
	s, err := f.Aggregated(in)
	if err != nil {
		return err
	}
	seq := make([]float64, len(p.Score))
	for i, x := range p.Score {
		seq[i] = float64(x)
	}
	chk.Vector("sequence_advantages", seq, floats(want.Seq))
	chk.Vector("aggregated_rewards", s, floats(want.Agg))
	return nil
}

// checkDuplicates checks the deterministic part of a grpo duplication case:
// the kept rows come first, then duplicated_group_count blocks, each a copy
// of one of the candidate groups.
func checkDuplicates(chk *conformance.Checker, p *Plan, exps []GoldenExperience, got []GotRow,
	prefix *[]GoldenRow, dupCount *int, candidates []string, outMin, outMax *int) {
	n := len(*prefix)
	if len(got) < n {
		chk.Failf("output_count", strconv.Itoa(len(got)), fmt.Sprintf(">= %d", n))
		return
	}
	CheckRows(chk, "outputs_prefix", got[:n], *prefix)
	if dupCount != nil {
		chk.Int("duplicated_group_count", len(p.Dups), *dupCount)
	}
	for i, d := range p.Dups {
		tid := exps[p.Groups.Group(int(d.Group))[0]].EID.TID()
		found := false
		for _, c := range candidates {
			found = found || c == tid
		}
		if !found {
			chk.Failf(fmt.Sprintf("duplicate[%d].group", i), tid, fmt.Sprint(candidates))
		}
	}
	if outMin != nil && outMax != nil && (len(got) < *outMin || len(got) > *outMax) {
		chk.Failf("output_count", strconv.Itoa(len(got)), fmt.Sprintf("[%d, %d]", *outMin, *outMax))
	}
}

// checkBalanceDrop checks a rec drop="balance" case: every row that may be
// dropped is either all zeros or equals its kept value, and each group drops
// the expected number of rows.
func checkBalanceDrop(chk *conformance.Checker, got []GotRow, want []GoldenRow, droppedBy map[string]int) {
	if len(got) != len(want) {
		chk.Failf("outputs count", strconv.Itoa(len(got)), strconv.Itoa(len(want)))
		return
	}
	dropped := map[string]int{}
	for i, w := range want {
		if w.MayBeDropped && allZero(got[i].Advantages) && !allZero(floats(w.AdvantagesIfKept)) {
			dropped[w.EID.TID()]++
			continue
		}
		if w.MayBeDropped {
			w.Advantages, w.Returns = w.AdvantagesIfKept, w.AdvantagesIfKept
		}
		CheckRows(chk, fmt.Sprintf("outputs[%d]", i), got[i:i+1], []GoldenRow{w})
	}
	for tid, n := range droppedBy {
		chk.Int("dropped_count_by_group."+tid, dropped[tid], n)
	}
}

func allZero(x []float64) bool {
	for _, v := range x {
		if v != 0 {
			return false
		}
	}
	return true
}

// goldenBatch stacks golden experiences into a trainer batch; old_logprob
// fills both old_log_probs and rollout_log_probs, as the generator did.
func goldenBatch(exps []GoldenExperience) *TokenBatch {
	lengths := make([]int, len(exps))
	tids := make([]string, len(exps))
	b := &TokenBatch{}
	for i, e := range exps {
		lengths[i] = len(e.ActionMask)
		tids[i] = e.EID.TID()
		b.Mask = append(b.Mask, e.ActionMask...)
		b.TokenLevelRewards = appendFloats(b.TokenLevelRewards, e.TokenLevelRewards)
		b.Values = appendFloats(b.Values, e.Values)
		b.OldLogprobs = appendFloats(b.OldLogprobs, e.OldLogprob)
		b.TeacherLogprobs = appendFloats(b.TeacherLogprobs, e.TeacherLogprob)
		b.Entropys = appendFloats(b.Entropys, e.Entropy)
		b.Necs = appendFloats(b.Necs, e.Necs)
		if e.RewardBaseline != nil {
			b.RewardBaselines = append(b.RewardBaselines, float64(*e.RewardBaseline))
		}
	}
	b.RolloutLogprobs = b.OldLogprobs
	b.Rows = agg.NewRows(lengths)
	b.Groups = GroupBy(tids)
	return b
}

func appendFloats(dst []float64, src []conformance.Float) []float64 {
	for _, f := range src {
		dst = append(dst, float64(f))
	}
	return dst
}

// resultRows splits a trainer result into per-experience rows (input order).
func resultRows(res *TokenResult, exps []GoldenExperience, withMask bool) []GotRow {
	rows := make([]GotRow, len(exps))
	off := 0
	for i, e := range exps {
		n := len(e.ActionMask)
		rows[i] = GotRow{EID: e.EID, Advantages: res.Advantages[off : off+n], Returns: res.Returns[off : off+n]}
		if withMask {
			rows[i].ActionMask = res.Mask[off : off+n]
		}
		off += n
	}
	return rows
}
