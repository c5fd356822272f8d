package pipeline

import (
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/bitutil"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/advantage"
	"github.com/rftpipe/rftpipe/stages/kl"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// TrainerSide returns the stages of a trainer-side advantage fn, as the
// trainer runs it on its batch — here the whole store is one trainer batch:
// the token-level rewards (the token_level_reward column, else each row's
// reward at its last response token) less the KL penalty when penalty is
// set (kl_penalty_fn), then the fn, writing advantages and returns (and
// action_mask for the fns that rewrite it). Like the trainer in bypass mode,
// the old log-probs are the old_logprob column, else the rollout logprobs.
//
// The fn streams: row-local work is done batch by batch, batch-wide
// statistics come from statistics passes (the fn's Streamed form) — or, for
// the group fns on outcome rewards, from the group pass's per-row rewards.
func TrainerSide(name string, fn advantage.TrainerFn, penalty *kl.Fn) []Stage {
	sc := &scoresStage{penalty: penalty}
	return []Stage{sc, &trainerStage{name: name, fn: fn, st: fn.Stream(), scores: sc}}
}

// tokenLevelRewards is the batch's per-token input the scores stage
// prepares for the trainer stage (Batch.SetTokens; not a column).
const tokenLevelRewards = "token_level_rewards"

// scoresStage prepares the token-level rewards of every batch.
type scoresStage struct {
	penalty *kl.Fn
	active  bool // a KL penalty fn is set
	ref     bool // the store has ref_logprob (else the penalty is 0)
	dense   bool // the store has token_level_reward
	run     *kl.Penalty
	// off: the trainer stage needs no token-level rewards (its row path
	// and its row-score path), and this stage has nothing to prepare
	off bool
}

func (s *scoresStage) Name() string { return "token_level_rewards" }

func (s *scoresStage) Needs() Needs {
	if s.off {
		return Needs{Columns: []string{schema.ActionMask}}
	}
	n := Needs{Columns: []string{schema.ActionMask}, Optional: []string{schema.Reward, schema.TokenLevelReward}, Passes: AllPasses}
	if s.active {
		n.Optional = append(n.Optional, schema.Logprobs, schema.OldLogprob, schema.RefLogprob)
	}
	return n
}

// Prepare implements Preparer.
func (s *scoresStage) Prepare(has func(string) bool) error {
	s.dense = has(schema.TokenLevelReward)
	s.active = s.penalty != nil && s.penalty.Kind != kl.None
	s.ref = has(schema.RefLogprob)
	if !s.dense && !has(schema.Reward) {
		return schema.BadInputf("the store has neither %s nor %s: the trainer needs a reward", schema.Reward, schema.TokenLevelReward)
	}
	return nil
}

// outcome reports whether each row's Σ token_level_rewards is its reward.
func (s *scoresStage) outcome() bool { return !s.dense && !(s.active && s.ref) }

// Observe implements Observer: the statistics passes see the same rewards
// (the penalty's metrics are the streaming pass's).
func (s *scoresStage) Observe(_ int, b *Batch) error {
	if s.off {
		return nil
	}
	var p *kl.Penalty
	if s.active {
		p = s.penalty.NewPenalty()
	}
	return s.scores(b, p)
}

func (s *scoresStage) Apply(b *Batch) error {
	if s.off {
		return nil
	}
	if s.active && s.run == nil {
		s.run = s.penalty.NewPenalty()
	}
	return s.scores(b, s.run)
}

// scores sets the batch's token_level_rewards, less penalty p (if any).
func (s *scoresStage) scores(b *Batch, p *kl.Penalty) error {
	rows, err := b.Rows()
	if err != nil {
		return err
	}
	var sc []float64
	if s.dense {
		if sc, err = b.Tokens(schema.TokenLevelReward); err != nil {
			return err
		}
	} else {
		sc = make([]float64, rows.Tokens())
		rew, _ := b.Column(schema.Reward).(interface {
			IsValid(int) bool
			Value(int) float64
		})
		for r := 0; r < b.Len(); r++ {
			v := 0.0
			if rew != nil && rew.IsValid(r) {
				v = rew.Value(r)
			}
			if rew == nil || !rew.IsValid(r) || v != v {
				return b.Errorf(r, schema.Reward, errNoReward)
			}
			if lo, hi := rows.Span(r); hi > lo {
				sc[hi-1] = v
			}
		}
	}
	if p != nil {
		tb := tokens.New(rows)
		names := []string{tokens.OldLogProb, tokens.RefLogProb, tokens.ActionMask}
		cols := make([]string, len(names))
		for i, name := range names {
			cols[i] = inputColumn(b, name)
		}
		vals, err := b.TokensOf(cols...)
		if err != nil {
			return err
		}
		for i, name := range names {
			if vals[i] == nil {
				continue // no ref_logprob: the penalty says kl = 0
			}
			if err := tb.Set(name, vals[i]); err != nil {
				return err
			}
		}
		if sc, err = p.Apply(tb, sc); err != nil {
			return err
		}
	}
	b.SetTokens(tokenLevelRewards, sc)
	return nil
}

func (s *scoresStage) Finish(res *Result) error {
	if s.run != nil {
		res.Metrics.Merge("critic", s.run.Finish())
		res.Weights["critic/kl"] = float64(res.In) // a mean over rows
	}
	return nil
}

// errNoReward is the error of a row without a reward.
const errNoReward = "null or NaN reward (the trainer needs a reward on every row)"

// trainerStage runs a trainer-side fn over the store as one batch.
type trainerStage struct {
	name   string
	fn     advantage.TrainerFn
	st     advantage.Streamed
	scores *scoresStage
	// scalar: the fn's row scores come from the group pass's rewards
	// (advantage.RowScored on outcome rewards); each row's advantages and
	// returns are its score on its masked tokens, built from the mask's bits
	scalar bool
	// g maps store rows onto the group pass's rows the scores are of
	// (scalar: the rows the operators before kept)
	g *Grouping
	// rows: the fn's result comes from each row's reward and masked token
	// count (advantage.RowWhitened on outcome rewards, no KL penalty fn),
	// read from the columns without the token-level rewards
	rows bool
	// group ids of every store row, numbered in first appearance, when the
	// fn reads the uid grouping and no group pass gave them
	ids   []int32
	index map[string]int32
	key   []byte
}

func (t *trainerStage) Name() string { return t.name }

// Prepare implements Preparer.
func (t *trainerStage) Prepare(has func(string) bool) error {
	_, rowScored := t.st.(advantage.RowScored)
	t.scalar = rowScored && t.scores.outcome()
	rw, ok := t.st.(advantage.RowWhitened)
	t.rows = ok && rw.RowWhitened() && t.scores.outcome() && !t.scores.active
	// The KL penalty's metrics (kl 0 without ref_logprob) still need the
	// scores stage on the row-score path.
	t.scores.off = t.rows || (t.scalar && !t.scores.active)
	return nil
}

func (t *trainerStage) Needs() Needs {
	n := Needs{Columns: []string{schema.Batch, schema.Task, schema.ActionMask}, Optional: []string{schema.Experiment}, Passes: t.passes(),
		Writes: []string{schema.Advantages, schema.Returns}, CrossBatch: advantage.CrossBatchOf(t.st)}
	if t.rows {
		n.Columns = append(n.Columns, schema.Reward)
	} else {
		for _, in := range t.fn.Inputs() {
			n.Optional = append(n.Optional, trainerColumns(in)...)
		}
	}
	if t.scalar {
		n.Group = &GroupNeeds{}
	}
	if _, ok := t.fn.(advantage.MaskRewriter); ok {
		n.Writes = append(n.Writes, schema.ActionMask)
	}
	return n
}

// passes is the number of statistics passes: the fn's, and one to number
// the groups when the fn reads them and no group pass does.
func (t *trainerStage) passes() int {
	n := t.st.Passes()
	if n == 0 && !t.scalar && slices.Contains(t.fn.Inputs(), advantage.InGroups) {
		n = 1
	}
	return n
}

// trainerColumns returns the store columns a trainer-side input (verl's
// name) is read from, the first present: its schema.Input's.
func trainerColumns(in string) []string {
	switch in {
	case advantage.InRolloutLogprobs:
		return []string{schema.Logprobs}
	case advantage.InNecs:
		return []string{in} // no store column of rftpipe's holds Clip_V's signal
	}
	if si, ok := schema.ParseInput(in); ok {
		return si.Columns()
	}
	return nil
}

func (t *trainerStage) Group(g *Grouping) error {
	if !t.scalar {
		return nil
	}
	if g.Invalid > 0 {
		return schema.BadInputf("store row %d: null or NaN reward (the trainer needs a reward on every row)", g.FirstInvalid)
	}
	ids := make([]int32, g.Input.N())
	for k := 0; k < g.Input.Tasks.Len(); k++ {
		for _, r := range g.Input.Tasks.Group(k) {
			ids[r] = int32(k)
		}
	}
	t.g = g
	return t.st.(advantage.RowScored).SetRowScores(g.Input.Reward, ids)
}

func (t *trainerStage) Observe(pass int, b *Batch) error {
	if pass == 0 && !t.scalar {
		t.number(b)
	}
	if pass >= t.st.Passes() {
		return nil
	}
	if t.rows {
		score, count, err := rowInputs(b)
		if err != nil {
			return err
		}
		t.st.(advantage.RowWhitened).ObserveRows(score, count)
		return nil
	}
	c, err := t.chunk(b)
	if err != nil {
		return err
	}
	return t.st.Observe(pass, c)
}

// number numbers the uid groups of the batch's rows: tid = batch/task
// within the row's experiment, where the store has one (as the group
// pass's).
func (t *trainerStage) number(b *Batch) {
	if t.index == nil {
		t.index = map[string]int32{}
	}
	ids := []arrow.Array{b.Column(schema.Batch), b.Column(schema.Task)}
	if e := b.Column(schema.Experiment); e != nil {
		ids = append([]arrow.Array{e}, ids...)
	}
	for i := 0; i < b.Len(); i++ {
		t.key = schema.AppendKey(t.key[:0], i, ids...)
		id, ok := t.index[string(t.key)]
		if !ok {
			id = int32(len(t.index))
			t.index[string(t.key)] = id
		}
		t.ids = append(t.ids, id)
	}
}

// chunk returns the batch as a window of the trainer batch.
func (t *trainerStage) chunk(b *Batch) (*advantage.Chunk, error) {
	rows, err := b.Rows()
	if err != nil {
		return nil, err
	}
	c := &advantage.Chunk{First: int(b.Row)}
	c.Rows = rows
	if c.Mask, err = b.Tokens(schema.ActionMask); err != nil {
		return nil, err
	}
	if t.ids != nil {
		c.Group = t.ids[b.Row : b.Row+int64(b.Len())]
	}
	for _, in := range t.fn.Inputs() {
		var v []float64
		switch in {
		case advantage.InTokenLevelRewards:
			v, err = b.Tokens(tokenLevelRewards)
		case advantage.InGroups, advantage.InRewardBaselines:
			continue
		default:
			for _, col := range trainerColumns(in) {
				if b.Has(col) {
					v, err = b.Tokens(col)
					break
				}
			}
		}
		if err != nil {
			return nil, err
		}
		c.Set(in, v)
	}
	return c, nil
}

// rowInputs returns each row's reward and its masked token count (the
// action_mask bits set).
func rowInputs(b *Batch) (score, count []float64, err error) {
	rew, _ := b.Column(schema.Reward).(*array.Float64)
	mask, _ := b.Column(schema.ActionMask).(array.ListLike)
	var bits *array.Boolean
	if mask != nil {
		bits, _ = mask.ListValues().(*array.Boolean)
	}
	if bits == nil {
		return nil, nil, schema.Errorf(b.File, -1, schema.ActionMask, "want a list of bool")
	}
	raw, off := bitmap(bits)
	score, count = make([]float64, b.Len()), make([]float64, b.Len())
	for r := range score {
		if rew == nil || !rew.IsValid(r) || rew.Value(r) != rew.Value(r) {
			return nil, nil, b.Errorf(r, schema.Reward, errNoReward)
		}
		score[r] = rew.Value(r)
		lo, hi := mask.ValueOffsets(r)
		count[r] = float64(bitutil.CountSetBits(raw, off+int(lo), int(hi-lo)))
	}
	return score, count, nil
}

// applyRows is Apply on the row path: advantages are each row's whitened
// reward on its masked tokens, returns its reward on every token.
func (t *trainerStage) applyRows(b *Batch) error {
	score, _, err := rowInputs(b)
	if err != nil {
		return err
	}
	adv, ret := make([]float32, len(score)), make([]float32, len(score))
	for r, v := range score {
		a, err := t.st.(advantage.RowWhitened).WhitenRow(v)
		if err != nil {
			return fmt.Errorf("%s: %w", b.File, err)
		}
		adv[r], ret[r] = float32(a), float32(v+0) // v+0: the token path's running sum
	}
	a, err := broadcast(b.Mask(), adv, true)
	if err != nil {
		return err
	}
	b.Set(schema.Advantages, a)
	if a, err = broadcast(b.Mask(), ret, false); err != nil {
		return err
	}
	b.Set(schema.Returns, a)
	return nil
}

// applyScalar is Apply on the row-score path: advantages = returns = each
// row's group score on its masked tokens, as the token path's score × mask
// stored as float32.
func (t *trainerStage) applyScalar(b *Batch) error {
	if _, err := b.Rows(); err != nil { // a null mask row, as on the token path
		return err
	}
	// The scores of the group pass's rows; a row the operators dropped
	// (written nowhere) scores 0.
	score, err := t.st.(advantage.RowScored).RowScores(0, t.g.Input.N())
	if err != nil {
		return fmt.Errorf("%s: %w", b.File, err)
	}
	s32 := make([]float32, b.Len())
	for r := range s32 {
		if k := t.g.Row(b.Row + int64(r)); k >= 0 {
			s32[r] = float32(score[k])
		}
	}
	adv, err := broadcast(b.Mask(), s32, true)
	if err != nil {
		return err
	}
	b.Set(schema.Advantages, adv)
	adv.Retain() // returns = advantages: one array, encoded once
	b.Set(schema.Returns, adv)
	return nil
}

func (t *trainerStage) Apply(b *Batch) error {
	switch {
	case t.rows:
		return t.applyRows(b)
	case t.scalar:
		return t.applyScalar(b)
	}
	c, err := t.chunk(b)
	if err != nil {
		return err
	}
	res, err := t.st.Apply(c)
	if err != nil {
		return fmt.Errorf("%s: %w%s", b.File, err, columnHint(err))
	}
	if err := b.SetList(schema.Advantages, res.Advantages); err != nil {
		return err
	}
	if sameSlice(res.Returns, res.Advantages) || slices.Equal(res.Returns, res.Advantages) {
		// returns = advantages (outcome-score fns): one array, encoded once
		adv := b.set[schema.Advantages]
		adv.Retain()
		b.Set(schema.Returns, adv)
	} else if err := b.SetList(schema.Returns, res.Returns); err != nil {
		return err
	}
	if _, ok := t.fn.(advantage.MaskRewriter); ok {
		return b.SetList(schema.ActionMask, res.Mask)
	}
	return nil
}

// Finish implements Finisher. The fn's own metrics are not published:
// upstream's trainer discards them.
func (t *trainerStage) Finish(res *Result) error {
	res.Groups = max(res.Groups, len(t.index))
	return nil
}

// columnHint explains how to provide a trainer-side column a store lacks.
func columnHint(err error) string {
	var me *advantage.MissingColumnError
	if errors.As(err, &me) && (me.Column == advantage.InValues || me.Column == advantage.InTeacherLogprobs) {
		return fmt.Sprintf(" (the store has no %s column; add one, or map one with the job file's columns section)", trainerColumns(me.Column)[0])
	}
	return ""
}

// sameSlice reports whether a and b are the same values in memory (so
// equal without reading them).
func sameSlice(a, b []float64) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
