package job

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/rftpipe/rftpipe/pipeline"
	"github.com/rftpipe/rftpipe/pipeline/algorithm"
	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/stages/advantage"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// Trainer-side input columns that are not experience fields: the critic's
// values and the reference model's log-probs, under verl's names. A store
// that has them (or maps them with the columns section) can be run through
// the trainer-side fns that read them.
const (
	ValuesColumn     = "values"
	RefLogProbColumn = "ref_log_prob"
)

// tokenCols are the per-token inputs read for a trainer-side fn (rftpipe
// names); absent optional columns stay unset and the fn
// reports the ones it needs.
var tokenCols = []string{schema.ActionMask, schema.Logprobs, schema.TokenLevelReward, ValuesColumn, schema.TeacherLogprobs, RefLogProbColumn}

// trainerInput is the whole store as one padded trainer batch, flat.
type trainerInput struct {
	rows   agg.Rows
	cols   map[string][]float64 // by rftpipe name; nil slices: column absent
	reward []float64            // per row (NaN: null)
	tids   []string
}

// runTrainerSide computes the trainer-side advantage fn of res over the
// whole store (the store is one trainer batch), after the KL penalty when
// kl_penalty_fn is set, and writes every input row with advantages and
// returns. Like the trainer: old log-probs are the rollout logprobs (bypass
// mode), token_level_scores are token_level_reward when every row has it,
// else the reward at each row's last response token.
func runTrainerSide(ctx context.Context, j *Job, res *algorithm.Resolved) (*pipeline.Result, error) {
	fn, err := res.TrainerAdvantage()
	if err != nil {
		return nil, err
	}
	in, err := readTrainerInput(ctx, j)
	if err != nil {
		return nil, err
	}
	scores, err := in.scores(j.Input)
	if err != nil {
		return nil, err
	}
	metrics := agg.Metrics{}
	rewards := scores
	if res.Config.Fn(algorithm.KLPenaltyFn) != "none" {
		klFn, err := res.KL(algorithm.KLPenaltyFn)
		if err != nil {
			return nil, err
		}
		b := tokens.New(in.rows)
		for name, canon := range map[string]string{schema.Logprobs: tokens.OldLogProb, RefLogProbColumn: tokens.RefLogProb, schema.ActionMask: tokens.ActionMask} {
			if v := in.cols[name]; v != nil {
				if err := b.Set(canon, v); err != nil {
					return nil, err
				}
			}
		}
		var m agg.Metrics
		if rewards, m, err = klFn.ApplyPenalty(b, scores); err != nil {
			return nil, err
		}
		metrics.Merge("critic", m)
	}
	tb := &advantage.TokenBatch{
		Rows:              in.rows,
		Mask:              in.cols[schema.ActionMask],
		TokenLevelRewards: rewards,
		Values:            in.cols[ValuesColumn],
		OldLogprobs:       in.cols[schema.Logprobs],
		RolloutLogprobs:   in.cols[schema.Logprobs],
		TeacherLogprobs:   in.cols[schema.TeacherLogprobs],
		Groups:            advantage.GroupBy(in.tids),
	}
	out, err := fn.Compute(tb)
	if err != nil {
		return nil, fmt.Errorf("%s: %w%s", j.Input, err, columnHint(err))
	}
	n, err := rewrite(ctx, j, func(name string) []float64 {
		switch name {
		case schema.Advantages:
			return out.Advantages
		case schema.Returns:
			return out.Returns
		case schema.ActionMask:
			return out.Mask // nil unless the fn rewrites the mask (clipb, clipv)
		}
		return nil
	}, in.rows)
	if err != nil {
		return nil, err
	}
	return &pipeline.Result{In: int64(in.rows.N()), Out: n, Groups: tb.Groups.Len(), Metrics: metrics}, nil
}

// columnHint explains how to provide a trainer-side column a store lacks.
func columnHint(err error) string {
	for _, c := range []string{ValuesColumn, "teacher_logprobs"} {
		if errors.Is(err, schema.ErrBadInput) && strings.Contains(err.Error(), "missing column "+c) {
			return fmt.Sprintf(" (the store has no %s column; add one, or map one in the job file's columns section)", c)
		}
	}
	return ""
}

// storeName returns the store column holding rftpipe column name.
func (j *Job) storeName(name string) string {
	if c, ok := j.Columns[name]; ok {
		return c
	}
	return name
}

// readTrainerInput reads the scalar and per-token inputs of every row.
func readTrainerInput(ctx context.Context, j *Job) (*trainerInput, error) {
	want := []string{schema.Batch, schema.Task, schema.Reward}
	want = append(want, tokenCols...)
	names := make([]string, len(want))
	for i, w := range want {
		names[i] = j.storeName(w)
	}
	r, err := store.Open(j.Input, store.Columns(names...))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if err := schema.Require(j.Input, r.Schema(), j.storeName(schema.Batch), j.storeName(schema.Task), j.storeName(schema.ActionMask)); err != nil {
		return nil, err
	}
	in := &trainerInput{cols: map[string][]float64{}}
	var lengths []int
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		file, _, first := r.Pos()
		col := func(name string) arrow.Array {
			if idx := rec.Schema().FieldIndices(j.storeName(name)); len(idx) > 0 {
				return rec.Column(idx[0])
			}
			return nil
		}
		batch, task := col(schema.Batch), col(schema.Task)
		mask := col(schema.ActionMask).(array.ListLike)
		rew, _ := col(schema.Reward).(*array.Float64)
		for i := 0; i < int(rec.NumRows()); i++ {
			in.tids = append(in.tids, advantage.TID(render(batch, i), render(task, i)))
			v := math.NaN()
			if rew != nil && rew.IsValid(i) {
				v = rew.Value(i)
			}
			in.reward = append(in.reward, v)
			lo, hi := mask.ValueOffsets(i)
			lengths = append(lengths, int(hi-lo))
		}
		for _, name := range tokenCols {
			a := col(name)
			if a == nil {
				continue
			}
			if err := in.appendTokens(file, first, name, a, lengths[len(lengths)-int(rec.NumRows()):]); err != nil {
				return nil, err
			}
		}
	}
	in.rows = agg.NewRows(lengths)
	return in, nil
}

// appendTokens appends one batch of a per-token column as float64; a null
// row of an optional column makes the column unusable (upstream uses a
// column only when every row has it), a row of the wrong length is an error.
func (in *trainerInput) appendTokens(file string, first int64, name string, a arrow.Array, lengths []int) error {
	l, ok := a.(array.ListLike)
	if !ok {
		return schema.Errorf(file, -1, name, "has type %s, want a list", a.DataType())
	}
	dst, ok := in.cols[name]
	if !ok {
		if len(in.reward) > len(lengths) {
			return nil // dropped in an earlier batch: stays absent
		}
		dst = []float64{}
	}
	for i, n := range lengths {
		if l.IsNull(i) {
			if name == schema.ActionMask {
				return schema.Errorf(file, first+int64(i), name, "null action_mask")
			}
			delete(in.cols, name)
			return nil
		}
		lo, hi := l.ValueOffsets(i)
		if int(hi-lo) != n {
			return schema.Errorf(file, first+int64(i), name, "%d values, the row has %d response tokens", hi-lo, n)
		}
		for k := lo; k < hi; k++ {
			dst = append(dst, listValue(l.ListValues(), int(k)))
		}
	}
	in.cols[name] = dst
	return nil
}

// listValue returns element k of a list's values as float64.
func listValue(v arrow.Array, k int) float64 {
	switch x := v.(type) {
	case *array.Float32:
		return float64(x.Value(k))
	case *array.Float64:
		return x.Value(k)
	case *array.Boolean:
		if x.Value(k) {
			return 1
		}
	}
	return 0
}

// render returns the string rendering of an id (integer or string column).
func render(a arrow.Array, i int) string {
	switch x := a.(type) {
	case *array.String:
		return x.Value(i)
	case *array.LargeString:
		return x.Value(i)
	case *array.Int64:
		return strconv.FormatInt(x.Value(i), 10)
	case *array.Int32:
		return strconv.FormatInt(int64(x.Value(i)), 10)
	}
	return a.ValueStr(i)
}

// scores builds token_level_scores: token_level_reward when every row has
// it, else each row's reward at its last response token.
func (in *trainerInput) scores(file string) ([]float64, error) {
	if tl := in.cols[schema.TokenLevelReward]; tl != nil {
		return tl, nil
	}
	out := make([]float64, in.rows.Tokens())
	for r, v := range in.reward {
		if v != v {
			return nil, schema.Errorf(file, int64(r), schema.Reward, "null or NaN reward (the trainer needs a reward on every row)")
		}
		if lo, hi := in.rows.Span(r); hi > lo {
			out[hi-1] = v
		}
	}
	return out, nil
}

// rewrite streams the input store to the output, replacing (or appending)
// the per-token columns computed returns (flat over rows; nil: unchanged).
// It returns the number of rows written.
func rewrite(ctx context.Context, j *Job, computed func(name string) []float64, rows agg.Rows) (int64, error) {
	r, err := store.Open(j.Input)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	var names []string
	for _, n := range []string{schema.Advantages, schema.Returns, schema.ActionMask} {
		if computed(n) != nil {
			names = append(names, n)
		}
	}
	in := r.Schema()
	fields := append([]arrow.Field(nil), in.Fields()...)
	pos := map[string]int{}
	for _, n := range names {
		idx := in.FieldIndices(j.storeName(n))
		if len(idx) > 0 {
			pos[n] = idx[0]
			fields[idx[0]] = arrow.Field{Name: fields[idx[0]].Name, Type: schema.Field(n).Type, Nullable: true}
		} else {
			pos[n] = len(fields)
			fields = append(fields, schema.Field(n))
		}
	}
	md := in.Metadata()
	out := arrow.NewSchema(fields, &md)
	w, err := store.Create(j.Output, out, store.NotOver(r.Files()...))
	if err != nil {
		return 0, err
	}
	defer w.Abort()
	row := 0
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, err
		}
		n := int(rec.NumRows())
		cols := make([]arrow.Array, len(fields))
		for i := 0; i < int(rec.NumCols()); i++ {
			cols[i] = rec.Column(i)
		}
		var built []arrow.Array
		for _, name := range names {
			a := buildList(computed(name), rows, row, row+n, name == schema.ActionMask)
			built = append(built, a)
			cols[pos[name]] = a
		}
		outRec := array.NewRecord(out, cols, int64(n))
		err = w.Write(outRec)
		outRec.Release()
		for _, a := range built {
			a.Release()
		}
		if err != nil {
			return 0, err
		}
		row += n
	}
	if err := w.Commit(); err != nil {
		return 0, err
	}
	return w.Rows(), nil
}

// buildList builds the list column of rows [from, to) of flat values:
// list<bool> for a mask, list<float32> otherwise.
func buildList(flat []float64, rows agg.Rows, from, to int, isMask bool) arrow.Array {
	mem := memory.DefaultAllocator
	if isMask {
		b := array.NewListBuilder(mem, arrow.FixedWidthTypes.Boolean)
		defer b.Release()
		vb := b.ValueBuilder().(*array.BooleanBuilder)
		for r := from; r < to; r++ {
			b.Append(true)
			lo, hi := rows.Span(r)
			for _, v := range flat[lo:hi] {
				vb.Append(v != 0)
			}
		}
		return b.NewArray()
	}
	b := array.NewListBuilder(mem, arrow.PrimitiveTypes.Float32)
	defer b.Release()
	vb := b.ValueBuilder().(*array.Float32Builder)
	for r := from; r < to; r++ {
		b.Append(true)
		lo, hi := rows.Span(r)
		for _, v := range flat[lo:hi] {
			vb.Append(float32(v))
		}
	}
	return b.NewArray()
}
