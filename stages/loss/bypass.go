package loss

import (
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
		args.Param{Name: "clip_ratio_c", Kind: args.Float, Ctor: 3.0, Doc: "dual-clip bound (ppo_clip)"},
		aggParam("token-mean"),
		opt("rollout_is", args.String, nil, "IS weight level: token or sequence (null: none)"),
		args.Param{Name: "rollout_is_threshold", Kind: args.Float, Nullable: true, Ctor: 2.0, Doc: "truncation cap of the weights (null: no weights)"},
		opt("rollout_is_batch_normalize", args.Bool, false, "divide the weights by their batch mean"),
		opt("rollout_rs", args.String, nil, "rejection-sampling options, comma-separated (null: none)"),
		opt("rollout_rs_threshold", args.String, nil, "rejection thresholds: one shared or one per option"),
		args.Param{Name: "loss_type", Kind: args.String, Ctor: "ppo_clip", Choices: []string{"ppo_clip", "reinforce"}, Doc: "loss after the correction"},
		opt("ratio_bounds", args.Bool, false, "RC-01 fix: k1 bounds constrain old/rollout"),
		opt("zero_masked_weights", args.Bool, false, "RC-06 fix: weight 0 at masked positions"),
	)
	return &Def{
		Name:       "bypass_mode",
		CPUOnly:    true,
		WholeBatch: true,
		Params:     append(params, globalParams...),
		Inputs:     []string{tokens.OldLogProb, tokens.ActionMask, tokens.Advantages},
		build: func(v args.Values) (planner, error) {
			cfg := rollout.Default()
			cfg.IS, cfg.BatchNormalize = v.String("rollout_is"), v.Bool("rollout_is_batch_normalize")
			cfg.ISThreshold = nil
			if c, ok := v.OptFloat("rollout_is_threshold"); ok {
				cfg.ISThreshold = &c
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
	if _, ppo := p.k.(*PPO); ppo {
		w = nil // the PPO ratio already is π_θ/π_rollout; the weights only feed the metrics
	}
	rb := tokens.New(b.Rows)
	if err := rb.Set(tokens.ActionMask, mask); err != nil {
		return nil, err
	}
	term := tokens.Term{Kernel: p.k, Rows: tokens.AllRows, Mode: p.mode, Coef: 1, Global: p.global}
	lay, err := rb.Layout([]tokens.Term{term})
	if err != nil {
		return nil, err
	}
	st := lay.Stats[0]
	rk := &remasked{inner: p.k, rows: b.Rows, mask: mask, weights: w, count: make([]float64, b.Rows.N()), scale: make([]float64, b.Rows.N())}
	for r := range rk.scale {
		rk.count[r] = rb.RowCount(r)
		rk.scale[r], _ = rb.RowScale(term, st, r)
	}
	term.Kernel = rk
	return &Plan{
		Terms: []tokens.Term{term},
		Finish: func(res []tokens.TermResult) (Outcome, error) {
			v, m := p.k.Summary(p.mode, tokens.TermResult{Sums: res[0].Sums, Stats: st})
			for k, x := range corr {
				m[k] = x
			}
			return Outcome{Loss: v, Metrics: m}, nil
		},
	}, nil
}

// remasked evaluates a kernel on a replaced mask and weights (bypass mode's
// rejection-sampled mask), with the row scales of that mask.
type remasked struct {
	inner         Kernel
	rows          agg.Rows
	mask, weights []float64
	count, scale  []float64
}

// Sums implements tokens.Kernel.
func (k *remasked) Sums() int { return k.inner.Sums() }

// Row implements tokens.Kernel.
func (k *remasked) Row(r *tokens.Row, s []float64) {
	lo, hi := k.rows.Span(r.Index)
	v := *r
	v.Mask, v.Weights = k.mask[lo:hi:hi], nil
	if k.weights != nil {
		v.Weights = k.weights[lo:hi:hi]
	}
	v.Count, v.Scale, v.GradScale = k.count[r.Index], k.scale[r.Index], k.scale[r.Index]
	k.inner.Row(&v, s)
}
