package pipeline

import (
	"context"
	dbsql "database/sql"
	"math"
	"slices"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/bitutil"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/rftpipe/rftpipe/schema"
	rsql "github.com/rftpipe/rftpipe/sql"
	"github.com/rftpipe/rftpipe/sql/duckdb"
	"github.com/rftpipe/rftpipe/stages/advantage"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/operator"
)

// OperatorNeeds is what the group pass reads for experience operators
// (package operator) besides rewards and tasks.
type OperatorNeeds struct {
	// Metrics are the keys of the metrics JSON read per row.
	Metrics []string
	// Truncated, ResponseLength and ReturnsNorm: truncate_status, the
	// number of action_mask positions and info.returns_norm.
	Truncated, ResponseLength, ReturnsNorm bool
	// ModelVersion: model_version (a column the stage requires).
	ModelVersion bool
	// NoMetrics and NoTruncateStatus say the store lacks those columns.
	NoMetrics, NoTruncateStatus bool
}

// opScalars are the per-row values of OperatorNeeds, row for row with the
// group pass's Input.
type opScalars struct {
	metric         map[string][]float64 // NaN where absent
	hasMetric      map[string][]bool
	truncated      []bool
	respLen        []int64
	returnsNorm    []float64
	hasReturnsNorm []bool
	modelVersion   []int64 // -1 for null
}

// scanOperators reads what the operators need (operator_scalars.sql) into
// g.ops.
func scanOperators(ctx context.Context, db *dbsql.DB, g *Grouping, n GroupNeeds, vars map[string]string) error {
	on := n.Operator
	s := &opScalars{metric: map[string][]float64{}, hasMetric: map[string][]bool{}}
	keys := on.Metrics
	if len(keys) == 0 {
		keys = []string{""}
	}
	for ki, key := range keys {
		v := map[string]string{"has_metric": "FALSE", "metric": "NULL", "truncated": "FALSE", "resp_len": "0", "info": "NULL", "model_version": "NULL"}
		for a, b := range vars {
			v[a] = b
		}
		if key != "" && !on.NoMetrics {
			path, err := jsonPath(key)
			if err != nil {
				return err
			}
			v["has_metric"] = "json_exists(metrics, " + path + ")"
			v["metric"] = "TRY_CAST(json_extract_string(metrics, " + path + ") AS DOUBLE)"
		}
		first := ki == 0
		if first {
			if on.Truncated && !on.NoTruncateStatus {
				v["truncated"] = "truncate_status = 'response_truncated'"
			}
			if on.ResponseLength {
				v["resp_len"] = "coalesce(len(action_mask), 0)"
			}
			if on.ReturnsNorm && !n.NoInfo {
				v["info"] = "info"
			}
			if on.ModelVersion {
				v["model_version"] = "model_version"
			}
		}
		var has, badM, tr, hasRN, badRN []bool
		var m, rn []float64
		var rl, mv, at []int64
		if err := duckdb.QueryColumns(ctx, db, rsql.Pipeline("operator_scalars", v), &has, &m, &badM, &tr, &rl, &hasRN, &rn, &badRN, &mv, &at); err != nil {
			return groupError(err)
		}
		for i := range at { // the first bad value, in store order
			switch {
			case badM[i]:
				return schema.BadInputf("column %s: row %d: metrics.%s is not a number", schema.Metrics, at[i], key)
			case first && badRN[i]:
				return schema.BadInputf("column %s: row %d: info.returns_norm is not a number", schema.Info, at[i])
			}
		}
		if first {
			s.truncated, s.respLen = tr, rl
			s.returnsNorm, s.hasReturnsNorm = rn, hasRN
			s.modelVersion = mv
		}
		if key != "" {
			s.metric[key], s.hasMetric[key] = m, has
		}
	}
	g.ops = s
	return nil
}

// Operator is one configured experience operator of a job: its registry
// name and the operator.
type Operator struct {
	Name string
	Op   operator.Operator
}

// Operators returns the stage of experience operators run in order, as
// Trinity-RFT's experience pipeline runs data_processor.experience_pipeline.
// operators: each operator sees the rows the ones before it kept, with the
// rewards they set, task group by task group (tid = batch/task, so an
// explore step at a time). The chain runs on the group pass's per-row
// scalars; the streaming pass then drops the rows it dropped (with their
// drop reason and the operator's name, for a rejected-rows store), writes
// the rewards it set and zeroes the action masks it masked. The stages
// after it (the advantage fn) see only the kept rows and the new rewards.
// Rows keep input order (upstream orders the kept groups first-appearance
// first, which is input order for a store written group by group).
func Operators(ops []Operator) Stage { return &operatorStage{ops: ops} }

// operatorStage is the stage of Operators.
type operatorStage struct {
	ops []Operator
	g0  Grouping // the group pass's rows, before the chain restricted them
	// Per group-pass row: the index of its drop reason and dropping
	// operator in reasons and bys (0: kept), the new reward (nil: none set),
	// whether its mask is zeroed.
	why, by  []uint8
	reasons  []string
	bys      []string
	reward   []float64
	maskZero []bool
	dropped  int
	metrics  agg.Metrics
	opTime   time.Duration
}

func (s *operatorStage) Name() string { return "experience_operators" }

func (s *operatorStage) Needs() Needs {
	var on OperatorNeeds
	for _, o := range s.ops {
		n := o.Op.Needs()
		if n.Metric != "" && !slices.Contains(on.Metrics, n.Metric) {
			on.Metrics = append(on.Metrics, n.Metric)
		}
		on.Truncated = on.Truncated || n.Truncated
		on.ResponseLength = on.ResponseLength || n.ResponseLength
		on.ReturnsNorm = on.ReturnsNorm || n.ReturnsNorm
		on.ModelVersion = on.ModelVersion || n.ModelVersion
	}
	n := Needs{
		Columns: []string{schema.Batch, schema.Task, schema.Reward},
		Group:   &GroupNeeds{Operators: true, Operator: on},
		Drops:   s.why == nil || s.dropped > 0 || s.g0.planRow != nil,
	}
	if on.ModelVersion {
		n.Columns = append(n.Columns, schema.ModelVersion)
	}
	if s.reward != nil {
		n.Writes = append(n.Writes, schema.Reward)
	}
	if s.maskZero != nil {
		n.Columns = append(n.Columns, schema.ActionMask)
		n.Writes = append(n.Writes, schema.ActionMask)
	}
	return n
}

// Group runs the chain over the group pass's rows and restricts g to the
// rows it keeps, with the rewards it set.
func (s *operatorStage) Group(g *Grouping) error {
	start := time.Now()
	s.g0 = *g
	in := g.Input
	n := in.N()
	s.why, s.by = make([]uint8, n), make([]uint8, n)
	s.reasons, s.bys = []string{""}, []string{""}
	s.metrics = agg.Metrics{}
	reward := slices.Clone(in.Reward)
	rowMetrics := map[string][]float64{}
	cur := make([]int32, n)
	for i := range cur {
		cur[i] = int32(i)
	}
	taskID := in.Tasks.IDOf(n)
	for _, o := range s.ops {
		oin, err := s.input(g, o.Op.Needs(), cur, taskID, reward, rowMetrics)
		if err != nil {
			return err
		}
		res, err := o.Op.Apply(oin)
		if err != nil {
			return err
		}
		byIdx := index(&s.bys, o.Name)
		next := cur[:0:0]
		for k, r := range cur {
			if why := res.Reason[k]; why != "" {
				s.why[r], s.by[r] = index(&s.reasons, why), byIdx
				s.dropped++
				continue
			}
			next = append(next, r)
			if res.Reward != nil {
				if s.reward == nil {
					s.reward = slices.Clone(in.Reward)
				}
				reward[r], s.reward[r] = res.Reward[k], res.Reward[k]
			}
			if res.MaskZero != nil && res.MaskZero[k] {
				if s.maskZero == nil {
					s.maskZero = make([]bool, n)
				}
				s.maskZero[r] = true
			}
		}
		for key, vals := range res.RowMetrics {
			full := rowMetrics[key]
			if full == nil {
				full = make([]float64, n)
				for i := range full {
					full[i] = math.NaN()
				}
				rowMetrics[key] = full
			}
			for k, r := range cur {
				full[r] = vals[k]
			}
		}
		s.metrics.Merge(o.Name, res.Metrics)
		cur = next
	}
	if s.dropped > 0 || s.reward != nil {
		keep := make([]bool, n)
		for _, r := range cur {
			keep[r] = true
		}
		g.restrict(keep, reward)
	}
	s.opTime = time.Since(start)
	return nil
}

// index returns the index of v in *list, appending it when new.
func index(list *[]string, v string) uint8 {
	if i := slices.Index(*list, v); i >= 0 {
		return uint8(i)
	}
	*list = append(*list, v)
	return uint8(len(*list) - 1)
}

// input builds an operator's Input over the rows cur of the group pass.
func (s *operatorStage) input(g *Grouping, need operator.Needs, cur, taskID []int32, reward []float64, rowMetrics map[string][]float64) (*operator.Input, error) {
	sc := g.ops
	in := &operator.Input{Tasks: regroup(taskID, cur), Reward: pick(reward, cur)}
	if need.Metric != "" {
		in.Metric, in.HasMetric = make([]float64, len(cur)), make([]bool, len(cur))
		set, vals := rowMetrics[need.Metric], sc.metric[need.Metric]
		for k, r := range cur {
			switch {
			case set != nil && !math.IsNaN(set[r]):
				in.Metric[k], in.HasMetric[k] = set[r], true
			case vals != nil && sc.hasMetric[need.Metric][r]:
				in.Metric[k], in.HasMetric[k] = vals[r], true
			}
		}
	}
	if need.Truncated {
		in.Truncated = pick(sc.truncated, cur)
	}
	if need.ResponseLength {
		in.ResponseLength = pick(sc.respLen, cur)
	}
	if need.ReturnsNorm {
		in.ReturnsNorm, in.HasReturnsNorm = pick(sc.returnsNorm, cur), pick(sc.hasReturnsNorm, cur)
	}
	if need.ModelVersion {
		in.ModelVersion = pick(sc.modelVersion, cur)
	}
	return in, nil
}

// pick returns s at the rows idx (nil for nil).
func pick[T any](s []T, idx []int32) []T {
	if s == nil {
		return nil
	}
	out := make([]T, len(idx))
	for k, r := range idx {
		out[k] = s[r]
	}
	return out
}

// regroup groups the rows idx (ascending) by their group id, renumbered
// densely in first-appearance order.
func regroup(id []int32, idx []int32) advantage.Groups {
	dense := map[int32]int32{}
	ids := make([]int32, len(idx))
	for k, r := range idx {
		d, ok := dense[id[r]]
		if !ok {
			d = int32(len(dense))
			dense[id[r]] = d
		}
		ids[k] = d
	}
	gr, _ := advantage.GroupByIDs(ids, len(dense)) // numbered in first-appearance order
	return gr
}

// renumber numbers the anchor ids left after a restriction densely again,
// in first-appearance order (what gigpo's grouping requires); -1 (no
// anchor) stays -1.
func renumber(ids []int32) []int32 {
	dense := map[int32]int32{}
	for k, id := range ids {
		if id < 0 {
			continue
		}
		d, ok := dense[id]
		if !ok {
			d = int32(len(dense))
			dense[id] = d
		}
		ids[k] = d
	}
	return ids
}

// restrict keeps only the rows of g.Input where keep is set, with rewards
// reward (indexed by the current rows); store rows of dropped rows map to
// -1. It builds new slices: a copy of g taken before still sees the old rows.
func (g *Grouping) restrict(keep []bool, reward []float64) {
	in := g.Input
	var idx []int32
	for r, k := range keep {
		if k {
			idx = append(idx, int32(r))
		}
	}
	newRow := make([]int32, len(keep))
	for r := range newRow {
		newRow[r] = -1
	}
	for k, r := range idx {
		newRow[r] = int32(k)
	}
	out := &advantage.Input{
		Reward: pick(reward, idx), Seed: in.Seed,
		Step: pick(in.Step, idx), LogprobMean: pick(in.LogprobMean, idx),
		StepReward: pick(in.StepReward, idx), HasStepReward: pick(in.HasStepReward, idx),
		Anchor: renumber(pick(in.Anchor, idx)), CoD: pick(in.CoD, idx),
		Tasks: regroup(in.Tasks.IDOf(len(keep)), idx),
	}
	if in.Runs.Len() > 0 {
		out.Runs = regroup(in.Runs.IDOf(len(keep)), idx)
	}
	for _, c := range in.Components {
		out.Components = append(out.Components, pick(c, idx))
	}
	planRow := make([]int32, g.Rows)
	for i := range planRow {
		if r := g.Row(int64(i)); r >= 0 {
			planRow[i] = newRow[r]
		} else {
			planRow[i] = -1
		}
	}
	g.Input, g.planRow = out, planRow
}

// Apply drops the rows the chain dropped, writes the rewards it set and
// zeroes the masks it masked.
func (s *operatorStage) Apply(b *Batch) error {
	var reward *array.Float64Builder
	if s.reward != nil {
		reward = array.NewFloat64Builder(b.mem)
		defer reward.Release()
	}
	var mask []float64
	var rows agg.Rows
	zero := s.maskZero != nil
	if zero && !s.masks(b) {
		// No row of this batch is masked: the input's mask goes through
		// as read when it has the written column's type.
		if in := b.Column(schema.ActionMask); in != nil && arrow.TypeEqual(in.DataType(), schema.Field(schema.ActionMask).Type) {
			in.Retain()
			b.Set(schema.ActionMask, in)
			zero = false
		}
	}
	if zero {
		a, err := s.zeroedMask(b)
		if err != nil {
			return err
		}
		if a != nil {
			b.SetWithTokens(schema.ActionMask, a)
			zero = false
		}
	}
	if zero {
		m, err := b.Tokens(schema.ActionMask)
		if err != nil {
			return err
		}
		if rows, err = b.Rows(); err != nil {
			return err
		}
		mask = slices.Clone(m)
	}
	rew := b.Column(schema.Reward)
	for i := 0; i < b.Len(); i++ {
		r := s.g0.Row(b.Row + int64(i))
		switch {
		case r < 0:
			b.DropFor(i, "invalid_reward_filter", advantage.DropInvalid)
		case s.why[r] != 0:
			b.DropFor(i, s.bys[s.by[r]], s.reasons[s.why[r]])
		}
		if reward != nil {
			switch {
			case r >= 0:
				reward.Append(s.reward[r])
			case rew.IsNull(i):
				reward.AppendNull()
			default:
				reward.Append(math.NaN())
			}
		}
		if mask != nil && r >= 0 && s.maskZero[r] {
			clear(mask[rows.Off[i]:rows.Off[i+1]])
		}
	}
	if reward != nil {
		b.Set(schema.Reward, reward.NewArray())
	}
	if mask != nil {
		b.SetTokens(schema.ActionMask, mask)
		return b.SetList(schema.ActionMask, mask)
	}
	return nil
}

// masks reports whether the chain zeroed the mask of a row of b.
func (s *operatorStage) masks(b *Batch) bool {
	for i := 0; i < b.Len(); i++ {
		if r := s.g0.Row(b.Row + int64(i)); r >= 0 && s.maskZero[r] {
			return true
		}
	}
	return false
}

// zeroedMask returns the batch's action_mask with the rows the chain masked
// zeroed, its values' bits copied from the input's and cleared over those
// rows; nil when the input column is not the list<bool> written (Tokens
// converts it then).
func (s *operatorStage) zeroedMask(b *Batch) (arrow.Array, error) {
	in, ok := b.Column(schema.ActionMask).(*array.List)
	if !ok || !arrow.TypeEqual(in.DataType(), schema.Field(schema.ActionMask).Type) {
		return nil, nil
	}
	rows, err := b.Rows() // a null row is an error, as Tokens'
	if err != nil {
		return nil, err
	}
	n := rows.Off[rows.N()]
	bits := make([]byte, bitutil.BytesForBits(int64(n)))
	if n > 0 {
		src, off := bitmap(in.ListValues().(*array.Boolean))
		first, _ := in.ValueOffsets(0)
		bitutil.CopyBitmap(src, off+int(first), n, bits, 0)
	}
	for i := 0; i < b.Len(); i++ {
		if r := s.g0.Row(b.Row + int64(i)); r >= 0 && s.maskZero[r] {
			bitutil.SetBitsTo(bits, int64(rows.Off[i]), int64(rows.Off[i+1]-rows.Off[i]), false)
		}
	}
	child := array.NewData(arrow.FixedWidthTypes.Boolean, n, []*memory.Buffer{nil, memory.NewBufferBytes(bits)}, nil, 0, 0)
	defer child.Release()
	return listOf(child, rows), nil
}

// Finish reports the operators' metrics under experience_pipeline/NAME/.
func (s *operatorStage) Finish(res *Result) error {
	res.Filtered += int64(s.dropped)
	res.Metrics.Merge("experience_pipeline", s.metrics)
	res.Metrics["time/experience_pipeline/operator/"+s.Name()] = s.opTime.Seconds()
	return nil
}

// checkTrainerAfter refuses a trainer-side fn after an operator chain that
// dropped rows, masked a row or set rewards, where the fn reads the store's
// rows, masks and rewards (all but the group fns' row-score path, which
// takes the chain's rows and rewards from the group pass): its statistics
// passes and token-level rewards read the store as it is, so they would
// count what upstream's trainer never sees (its batch is the operators'
// output). The chain's output written to a store first (with a
// pipeline-side fn), then the trainer-side fn over it, is exact.
func checkTrainerAfter(stages []Stage) error {
	var ops *operatorStage
	for _, st := range stages {
		switch s := st.(type) {
		case *operatorStage:
			ops = s
		case *trainerStage:
			if ops == nil || s.scalar {
				continue
			}
			what := ""
			switch {
			case ops.dropped > 0:
				what = "drop rows"
			case slices.Contains(ops.maskZero, true):
				what = "mask tokens"
			case ops.reward != nil:
				what = "set rewards"
			default:
				continue
			}
			return schema.BadInputf("advantage fn %s after experience operators that %s: it reads the store's rows, masks and rewards, not theirs; "+
				"run the operators into a store first (with a pipeline-side fn, e.g. --advantage-fn grpo), then %s over that store", s.name, what, s.name)
		}
	}
	return nil
}
