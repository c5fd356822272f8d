package loss

import (
	"fmt"

	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/rollout"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// bypassDef is verl's bypass_mode loss (core_algos.py
// compute_policy_loss_bypass_mode): old_logprob holds the rollout
// log-probs; the rollout correction runs per batch on the current log-prob
// versus them, without gradient, and then
//
//	loss_type ppo_clip:  ppo (dual clip) on the rejection-sampled mask, no weights
//	loss_type reinforce: -A·lp·w on the rejection-sampled mask (reinforce)
//
// Metrics: the loss's, then every rollout_corr/… metric. An all-masked
// batch is an error, as upstream.
func bypassDef() *Def {
	opt := func(name string, kind args.Kind, ctor any, doc string) args.Param {
		return args.Param{Name: name, Kind: kind, Nullable: ctor == nil, Ctor: ctor, Doc: doc}
	}
	params := append(clipParams(0.2, nil, nil, false),
		args.Param{Name: "clip_ratio_c", Kind: args.Float, Range: "(1,inf)", Ctor: 3.0, Doc: "dual-clip bound (ppo_clip)"},
		aggParam("token-mean"),
		opt("rollout_is", args.String, nil, "IS weight level: token or sequence (null: none)"),
		opt("rollout_is_threshold", args.String, "2.0", `truncation cap of the weights, or IcePop's "lower_upper" (null: no weights)`),
		opt("rollout_is_batch_normalize", args.Bool, false, "divide the weights by their batch mean"),
		opt("rollout_rs", args.String, nil, "rejection-sampling options, comma-separated (null: none)"),
		opt("rollout_rs_threshold", args.String, nil, "rejection thresholds: one shared or one per option"),
		args.Param{Name: "loss_type", Kind: args.String, Ctor: "ppo_clip", Choices: []string{"ppo_clip", "reinforce"}, Doc: "loss after the correction"},
		opt("ratio_bounds", args.Bool, false, "RC-01 fix: k1 bounds constrain old/rollout"),
		opt("zero_masked_weights", args.Bool, false, "RC-06 fix: weight 0 at masked positions"),
	)
	return &Def{
		Name:    "bypass_mode",
		CPUOnly: true,
		Params:  append(params, globalParams...),
		Inputs:  []string{tokens.OldLogProb, tokens.ActionMask, tokens.Advantages},
		build: func(v args.Values) (planner, error) {
			cfg := rollout.Default()
			cfg.IS, cfg.BatchNormalize = v.String("rollout_is"), v.Bool("rollout_is_batch_normalize")
			cfg.ISThreshold = nil
			if t, ok := v["rollout_is_threshold"].(string); ok {
				cfg.ISThreshold = t
			}
			cfg.RS, cfg.BypassMode, cfg.LossType = v.String("rollout_rs"), true, v.String("loss_type")
			if t, ok := v["rollout_rs_threshold"].(string); ok {
				cfg.RSThreshold = t
			}
			cfg.RatioBounds, cfg.ZeroMaskedWeights = v.Bool("ratio_bounds"), v.Bool("zero_masked_weights")
			corr, err := rollout.New(cfg)
			if err != nil {
				return nil, err
			}
			p := &bypass{corr: corr, mode: mode(v, "loss_agg_mode"), global: global(v)}
			if cfg.LossType == "reinforce" {
				p.k = &PG{KL: true}
			} else if p.k, err = newPPO(v); err != nil {
				return nil, err
			}
			return p, nil
		},
	}
}

// bypass is the planner of bypass_mode.
type bypass struct {
	corr   *rollout.Corrector
	k      Kernel // *PPO (ppo_clip, no weights) or *PG (reinforce, weights)
	mode   agg.Mode
	global *agg.Global
}

func (p *bypass) plan(b *tokens.Batch) (*Plan, error) {
	w, mask, corr, err := p.corr.Correct(rollout.Input{Rows: b.Rows, Old: b.Col(tokens.LogProb),
		Rollout: b.Col(tokens.OldLogProb), Mask: b.Col(tokens.ActionMask)})
	if err != nil {
		return nil, err
	}
	rk, st, err := p.remask(b.Rows, 0, mask, w, nil)
	if err != nil {
		return nil, err
	}
	return p.planOf(rk, func() (agg.Metrics, tokens.Stats, error) { return corr, st, nil }), nil
}

// term is the loss's one term over every row.
func (p *bypass) term() tokens.Term {
	return tokens.Term{Kernel: p.k, Rows: tokens.AllRows, Mode: p.mode, Coef: 1, Global: p.global}
}

// remask returns the kernel evaluated on the rejection-sampled mask and the
// weights (nil: none; ppo_clip takes none) of a batch, or of a window of
// one (first: the window's first row in the batch; t: the totals of the
// rejection-sampled mask over the whole batch), and the term's statistics
// over that mask.
func (p *bypass) remask(rows agg.Rows, first int, mask, w []float64, t *tokens.Totals) (*remasked, tokens.Stats, error) {
	if _, ppo := p.k.(*PPO); ppo {
		w = nil // the PPO ratio already is π_θ/π_rollout; the weights only feed the metrics
	}
	rb := tokens.New(rows)
	if err := rb.Set(tokens.ActionMask, mask); err != nil {
		return nil, tokens.Stats{}, err
	}
	if t != nil {
		if err := rb.SetWindow(first, *t); err != nil {
			return nil, tokens.Stats{}, err
		}
	}
	term := p.term()
	lay, err := rb.Layout([]tokens.Term{term})
	if err != nil {
		return nil, tokens.Stats{}, err
	}
	st := lay.Stats[0]
	rk := &remasked{inner: p.k, rows: rows, first: first, mask: mask, weights: w, count: make([]float64, rows.N()), scale: make([]float64, rows.N())}
	for r := range rk.scale {
		rk.count[r] = rb.RowCount(r)
		rk.scale[r], _ = rb.RowScale(term, st, r)
	}
	return rk, st, nil
}

// planOf is the plan evaluating kernel k; result gives, once every row is
// evaluated, the correction's metrics and the term's statistics.
func (p *bypass) planOf(k tokens.Kernel, result func() (agg.Metrics, tokens.Stats, error)) *Plan {
	term := p.term()
	term.Kernel = k
	return &Plan{
		Terms: []tokens.Term{term},
		Finish: func(res []tokens.TermResult) (Outcome, error) {
			corr, st, err := result()
			if err != nil {
				return Outcome{}, err
			}
			v, m := p.k.Summary(p.mode, tokens.TermResult{Sums: res[0].Sums, Stats: st})
			for k, x := range corr {
				m[k] = x
			}
			return Outcome{Loss: v, Metrics: m}, nil
		},
	}
}

// Stream is bypass_mode over a batch handed over in windows of rows (a
// store streamed record batch by record batch). The correction's mask and
// weights are per-row work, but the loss needs three batch-wide quantities
// first: the totals of the rejection-sampled mask (its token count, rows and
// non-empty rows: what the aggregation divides by), and, with
// rollout_is_batch_normalize, the batch mean of the truncated weights. A
// statistics pass gathers both (Observe, every window); then each window is
// corrected (Window) before the objective evaluates it, the correction's
// metric sums adding up over the windows. The result equals the loss of the
// whole batch at once.
type Stream struct {
	impl streamer
}

// streamer is the streamed evaluation of one loss: its statistics passes
// over the windows, then each window's preparation and the plan of its
// evaluation.
type streamer interface {
	passes() int
	observe(pass int, b *tokens.Batch) error
	window(b *tokens.Batch) error
	plan() (*Plan, error)
}

// bypassStream is bypass_mode's Stream.
type bypassStream struct {
	p      *bypass
	norm   rollout.Norm
	totals tokens.Totals // of the rejection-sampled mask
	acc    rollout.Acc
	cur    *remasked // the current window
}

// Stream returns the streaming evaluation of a loss whose windows need more
// than the batch's totals — bypass_mode (the rollout correction), m2po,
// clip_cov and kl_cov (their token selection over the whole batch); nil for
// any other loss —
// and the loss to hand to the objective instead of l: it evaluates the
// window set by Stream.Window.
func (l *Loss) Stream() (*Stream, *Loss) {
	var s *Stream
	switch p := l.p.(type) {
	case *bypass:
		s = &Stream{impl: &bypassStream{p: p}}
	case m2poPlanner:
		s = &Stream{impl: &m2poStream{p: p}}
	case covPlanner:
		s = &Stream{impl: &covStream{p: p, sel: p.newSel()}}
	default:
		return nil, nil
	}
	return s, &Loss{Def: l.Def, Args: l.Args, p: streamPlanner{s}}
}

// Passes returns the number of statistics passes (Observe) the stream
// needs before the windows are evaluated; it may grow after a pass (m2po's
// second pass), so it is asked again after each.
func (s *Stream) Passes() int { return s.impl.passes() }

// Float32 reports whether the statistics passes take the inputs but
// action_mask as a store holds them when it holds float32 values
// (tokens.Batch.Set32): m2po's selection, whose second moments are float32.
func (s *Stream) Float32() bool {
	_, ok := s.impl.(*m2poStream)
	return ok
}

// Observe is statistics pass pass over one window, windows in order.
func (s *Stream) Observe(pass int, b *tokens.Batch) error { return s.impl.observe(pass, b) }

// Window prepares window b (after every Observe) for its evaluation;
// windows in order.
func (s *Stream) Window(b *tokens.Batch) error { return s.impl.window(b) }

// input is the correction's input of a window: the current log-prob versus
// the rollout log-prob (old_logprob in bypass mode).
func input(b *tokens.Batch) (rollout.Input, error) {
	if err := b.Require(tokens.LogProb, tokens.OldLogProb, tokens.ActionMask); err != nil {
		return rollout.Input{}, fmt.Errorf("policy loss bypass_mode: %w", err)
	}
	return rollout.Input{Rows: b.Rows, Old: b.Col(tokens.LogProb), Rollout: b.Col(tokens.OldLogProb), Mask: b.Col(tokens.ActionMask)}, nil
}

func (s *bypassStream) passes() int { return 1 }

// observe is the statistics pass over one window: the batch normalisation
// sums and the totals of the rejection-sampled mask.
func (s *bypassStream) observe(_ int, b *tokens.Batch) error {
	in, err := input(b)
	if err != nil {
		return err
	}
	if err := s.p.corr.Observe(&s.norm, in); err != nil {
		return err
	}
	mask := make([]float64, len(in.Mask))
	var acc rollout.Acc
	if err := s.p.corr.Apply(in, nil, nil, mask, &acc); err != nil {
		return err
	}
	rb := tokens.New(b.Rows)
	if err := rb.Set(tokens.ActionMask, mask); err != nil {
		return err
	}
	s.totals.Add(tokens.TotalsOf(rb))
	return nil
}

// window corrects window b (after every observe): the kernel then
// evaluates b's rows on their rejection-sampled mask and weights, and the
// correction's metric sums take b's.
func (s *bypassStream) window(b *tokens.Batch) error {
	in, err := input(b)
	if err != nil {
		return err
	}
	w, mask := make([]float64, len(in.Mask)), make([]float64, len(in.Mask))
	if err := s.p.corr.Apply(in, &s.norm, w, mask, &s.acc); err != nil {
		return err
	}
	s.cur, _, err = s.p.remask(b.Rows, b.First(), mask, w, &s.totals)
	return err
}

// streamPlanner plans a Stream's evaluation.
type streamPlanner struct{ s *Stream }

func (sp streamPlanner) plan(*tokens.Batch) (*Plan, error) { return sp.s.impl.plan() }

func (s *bypassStream) plan() (*Plan, error) {
	return s.p.planOf(window{s}, func() (agg.Metrics, tokens.Stats, error) {
		m, err := s.p.corr.Metrics(&s.acc, &s.norm)
		st := tokens.Stats{Rows: s.totals.Rows[tokens.AllRows], NonEmpty: s.totals.NonEmpty[tokens.AllRows],
			Total: s.totals.Mask[tokens.AllRows], Width: s.totals.Width}
		return m, st, err
	}), nil
}

// window is the kernel of a bypassStream: the current window's.
type window struct{ s *bypassStream }

// Sums implements tokens.Kernel.
func (w window) Sums() int { return w.s.p.k.Sums() }

// Row implements tokens.Kernel.
func (w window) Row(r *tokens.Row, sums []float64) { w.s.cur.Row(r, sums) }

// remasked evaluates a kernel on a replaced mask and weights (bypass mode's
// rejection-sampled mask), with the row scales of that mask.
type remasked struct {
	inner         Kernel
	rows          agg.Rows
	first         int // the first row of rows in the batch
	mask, weights []float64
	count, scale  []float64
}

// Sums implements tokens.Kernel.
func (k *remasked) Sums() int { return k.inner.Sums() }

// Row implements tokens.Kernel.
func (k *remasked) Row(r *tokens.Row, s []float64) {
	i := r.Index - k.first
	lo, hi := k.rows.Span(i)
	v := *r
	v.Mask, v.Weights = k.mask[lo:hi:hi], nil
	if k.weights != nil {
		v.Weights = k.weights[lo:hi:hi]
	}
	v.Count, v.Scale, v.GradScale = k.count[i], k.scale[i], k.scale[i]
	k.inner.Row(&v, s)
}
