package advantage

import (
	"math"

	"github.com/rftpipe/rftpipe/stages/agg"
)

// Chunk is a window of rows of a trainer batch too large to hold at once (a
// store streamed record batch by record batch): the rows' token columns,
// and where the rows sit in the batch.
type Chunk struct {
	// TokenBatch holds the window's rows; its Groups are unused.
	TokenBatch
	// First is the batch row index of the window's first row.
	First int
	// Group is the uid group of each row: dense ids numbered in order of
	// first appearance over the whole batch (what GroupBy would number).
	Group []int32
}

// Streamed is a trainer-side fn computed window by window with the result
// of Compute over the whole batch: first Passes() observation passes over
// every window, in order (the batch-wide statistics: group baselines,
// whitening moments), then Apply on every window, in order, then Metrics.
type Streamed interface {
	Passes() int
	Observe(pass int, c *Chunk) error
	Apply(c *Chunk) (*TokenResult, error)
	Metrics() agg.Metrics
}

// RowScored is implemented by the streamed form of the group fns
// (grpo_verl, rloo, opmd_verl, asymre_verl): they read nothing but each
// row's Σ token_level_rewards and its uid group, which a caller that knows
// them (an outcome reward per row) can hand over instead of an observation
// pass. A row's advantages and returns are its RowScores value times its
// response mask, so such a caller needs no token-level input at all.
type RowScored interface {
	SetRowScores(score []float64, group []int32) error
	// RowScores returns the scores of the n batch rows from row first on.
	RowScores(first, n int) ([]float64, error)
}

// groupStream is the streamed form of a group fn.
type groupStream struct {
	fn    string
	rule  groupRule
	s     []float64 // Σ token_level_rewards per batch row
	group []int32
	score []float64 // per batch row, once computed
	given bool
}

func newGroupStream(fn string, rule groupRule) *groupStream { return &groupStream{fn: fn, rule: rule} }

func (g *groupStream) Passes() int {
	if g.given {
		return 0
	}
	return 1
}

func (g *groupStream) SetRowScores(score []float64, group []int32) error {
	if len(score) != len(group) {
		return errorf(g.fn, "%d row scores for %d rows", len(score), len(group))
	}
	g.s, g.group, g.given = score, group, true
	return nil
}

func (g *groupStream) Observe(_ int, c *Chunk) error {
	if err := c.needMask(g.fn); err != nil {
		return err
	}
	if err := c.need(g.fn, InTokenLevelRewards, c.TokenLevelRewards); err != nil {
		return err
	}
	if len(c.Group) != c.Rows.N() {
		return errorf(g.fn, "window has %d group ids for %d rows", len(c.Group), c.Rows.N())
	}
	g.s = append(g.s, c.rowSums(c.TokenLevelRewards)...)
	g.group = append(g.group, c.Group...)
	return nil
}

func (g *groupStream) Apply(c *Chunk) (*TokenResult, error) {
	if err := c.needMask(g.fn); err != nil {
		return nil, err
	}
	score, err := g.RowScores(c.First, c.Rows.N())
	if err != nil {
		return nil, err
	}
	adv := c.broadcast(score)
	return &TokenResult{Advantages: adv, Returns: adv}, nil
}

// RowScores implements RowScored: the group rule runs over every row's
// score once, on the first call.
func (g *groupStream) RowScores(first, n int) ([]float64, error) {
	if g.score == nil {
		groups := int32(0)
		for _, id := range g.group {
			groups = max(groups, id+1)
		}
		gs, err := GroupByIDs(g.group, int(groups))
		if err != nil {
			return nil, errorf(g.fn, "%v", err)
		}
		g.score = make([]float64, len(g.s))
		out := groupOut[float64]{score: g.score}
		if err := runGroups(gs, g.s, g.rule, SingletonUpstream, &out); err != nil {
			return nil, err
		}
	}
	if first < 0 || n < 0 || first+n > len(g.score) {
		return nil, errorf(g.fn, "window past the %d rows observed", len(g.score))
	}
	return g.score[first : first+n], nil
}

func (g *groupStream) Metrics() agg.Metrics { return agg.Metrics{} }

// RowWhitened is implemented by the streamed form of reinforceplusplus. When
// RowWhitened reports true (gamma 1) and each row's token_level_rewards is
// its outcome score on its last token, a row's returns are that score on
// every token of the row: the batch's whitening moments are those of the
// row scores weighted by each row's masked token count, which a caller that
// knows them hands over window by window (ObserveRows, in place of
// Observe), and the advantage of a row's masked tokens is WhitenRow of its
// score (0 on the others; the returns are the score).
type RowWhitened interface {
	RowWhitened() bool
	ObserveRows(score, count []float64)
	WhitenRow(score float64) (float64, error)
}

// whitenStream is the streamed form of the fns that whiten a row-local
// quantity over the batch (ppo's GAE, reinforceplusplus's returns). The
// masked moments are gathered per window and combined exactly: Σ m(x−μ)²
// = Σ_w [M2_w + n_w(μ_w − μ)²] for the window means μ_w.
type whitenStream struct {
	fn string
	// local returns the window's row-local quantity x and its returns; it
	// may write x into buf's memory (the observation pass's scratch, reused
	// window after window) when it has room.
	local  func(c *Chunk, buf []float64) (x, ret []float64, err error)
	remask bool
	buf    []float64
	// rowConstant: with outcome scores, x is each row's score on every
	// token of the row (RowWhitened)
	rowConstant bool
	// per-window count, sum and M2 around the window mean
	n, s, m2 []float64
	mean     float64
	inv      float64
	done     bool
}

func (w *whitenStream) Passes() int { return 1 }

func (w *whitenStream) Observe(_ int, c *Chunk) error {
	x, _, err := w.local(c, w.buf)
	if err != nil {
		return err
	}
	w.buf = x
	// agg.Count and agg.Sum in one loop: the same sums, one read of each
	n, s := 0.0, 0.0
	for i, m := range c.Mask[:len(x)] {
		n += m
		if m != 0 {
			s += x[i] * m
		}
	}
	m2 := 0.0
	if n > 0 {
		mu := s / n
		for i, v := range x {
			d := v - mu
			if c.Mask[i] != 0 {
				m2 += d * d * c.Mask[i]
			}
		}
	}
	w.n, w.s, w.m2 = append(w.n, n), append(w.s, s), append(w.m2, m2)
	return nil
}

func (w *whitenStream) RowWhitened() bool { return w.rowConstant }

// ObserveRows implements RowWhitened: the window's count, sum and M2 around
// its mean, from its rows.
func (w *whitenStream) ObserveRows(score, count []float64) {
	n, s := 0.0, 0.0
	for r, c := range count {
		n += c
		s += score[r] * c
	}
	m2 := 0.0
	if n > 0 {
		mu := s / n
		for r, c := range count {
			if c != 0 {
				d := score[r] - mu
				m2 += d * d * c
			}
		}
	}
	w.n, w.s, w.m2 = append(w.n, n), append(w.s, s), append(w.m2, m2)
}

// WhitenRow implements RowWhitened.
func (w *whitenStream) WhitenRow(score float64) (float64, error) {
	if !w.done {
		if err := w.moments(); err != nil {
			return 0, err
		}
	}
	return (score - w.mean) * w.inv, nil
}

// moments finishes the batch's masked mean and unbiased variance, worded
// and failing as agg.Var.
func (w *whitenStream) moments() error {
	var n, s float64
	for i := range w.n {
		n += w.n[i]
		s += w.s[i]
	}
	mean := s / (n + agg.Eps)
	ss := 0.0
	for i := range w.n {
		ss += w.m2[i]
		if w.n[i] > 0 {
			d := w.s[i]/w.n[i] - mean
			ss += w.n[i] * d * d
		}
	}
	switch {
	case n == 0:
		return errorf(w.fn, "%v", agg.ErrEmptyMask)
	case n == 1:
		return errorf(w.fn, "%v", agg.ErrOneMask)
	}
	vr := ss / (n + agg.Eps) * n / (n - 1)
	w.mean, w.inv, w.done = mean, 1/math.Sqrt(vr+agg.Eps), true
	return nil
}

func (w *whitenStream) Apply(c *Chunk) (*TokenResult, error) {
	if !w.done {
		if err := w.moments(); err != nil {
			return nil, err
		}
	}
	x, ret, err := w.local(c, nil)
	if err != nil {
		return nil, err
	}
	adv := make([]float64, len(x))
	for i, v := range x {
		adv[i] = (v - w.mean) * w.inv
		if w.remask {
			adv[i] *= c.Mask[i]
		}
	}
	return &TokenResult{Advantages: adv, Returns: ret}, nil
}

func (w *whitenStream) Metrics() agg.Metrics { return agg.Metrics{} }

// localStream is the streamed form of a fn whose rows are independent:
// Apply is Compute on the window; metrics over rows are finished from the
// per-row values every window reports.
type localStream struct {
	compute func(c *Chunk) (*TokenResult, []rowValues, error)
	finish  func(rows []rowValues) agg.Metrics
	rows    []rowValues
}

// rowValues are per-row values a fn's metrics are computed from.
type rowValues []float64

func (l *localStream) Passes() int               { return 0 }
func (l *localStream) Observe(int, *Chunk) error { return nil }
func (l *localStream) Metrics() agg.Metrics {
	if l.finish == nil {
		return agg.Metrics{}
	}
	return l.finish(l.rows)
}

func (l *localStream) Apply(c *Chunk) (*TokenResult, error) {
	res, rows, err := l.compute(c)
	if err != nil {
		return nil, err
	}
	if l.rows == nil {
		l.rows = make([]rowValues, len(rows))
	}
	for i, r := range rows {
		l.rows[i] = append(l.rows[i], r...)
	}
	return res, nil
}

// wholeStream runs a fn whose result depends on every token of the batch
// (clipb, clipv: batch-wide token statistics and a batch-wide top-K): the
// observation pass gathers the windows' inputs, Compute runs once over the
// whole batch, Apply hands out each window's slice. It holds the batch's
// token inputs in memory.
type wholeStream struct {
	fn    TrainerFn
	batch TokenBatch
	lens  []int
	ids   []int32
	res   *TokenResult
}

func (w *wholeStream) Passes() int { return 1 }

func (w *wholeStream) Observe(_ int, c *Chunk) error {
	b := &w.batch
	for r := 0; r < c.Rows.N(); r++ {
		lo, hi := c.Rows.Span(r)
		w.lens = append(w.lens, hi-lo)
	}
	for _, col := range []struct {
		dst *[]float64
		src []float64
	}{
		{&b.Mask, c.Mask}, {&b.TokenLevelRewards, c.TokenLevelRewards}, {&b.Values, c.Values},
		{&b.OldLogprobs, c.OldLogprobs}, {&b.RolloutLogprobs, c.RolloutLogprobs}, {&b.TeacherLogprobs, c.TeacherLogprobs},
		{&b.Entropys, c.Entropys}, {&b.Necs, c.Necs}, {&b.RewardBaselines, c.RewardBaselines},
	} {
		if col.src != nil {
			*col.dst = append(*col.dst, col.src...)
		}
	}
	w.ids = append(w.ids, c.Group...)
	return nil
}

func (w *wholeStream) Apply(c *Chunk) (*TokenResult, error) {
	if w.res == nil {
		w.batch.Rows = agg.NewRows(w.lens)
		n := int32(0)
		for _, id := range w.ids {
			n = max(n, id+1)
		}
		gs, err := GroupByIDs(w.ids, int(n))
		if err != nil {
			return nil, err
		}
		w.batch.Groups = gs
		if w.res, err = w.fn.Compute(&w.batch); err != nil {
			return nil, err
		}
	}
	lo, hi := w.batch.Rows.Off[c.First], w.batch.Rows.Off[c.First+c.Rows.N()]
	out := &TokenResult{Advantages: w.res.Advantages[lo:hi], Returns: w.res.Returns[lo:hi]}
	if w.res.Mask != nil {
		out.Mask = w.res.Mask[lo:hi]
	}
	return out, nil
}

func (w *wholeStream) Metrics() agg.Metrics {
	if w.res == nil {
		return agg.Metrics{}
	}
	return w.res.Metrics
}

// MaskRewriter is implemented by the fns whose result rewrites the
// response mask (TokenResult.Mask).
type MaskRewriter interface {
	RewritesMask()
}

// RewritesMask implements MaskRewriter.
func (f *ClipB) RewritesMask() {}

// RewritesMask implements MaskRewriter.
func (f *ClipV) RewritesMask() {}
