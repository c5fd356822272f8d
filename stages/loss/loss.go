// Package loss holds the 15 policy loss functions of Trinity-RFT, the 0.6
// line's m2po, and verl's gpg, geo_mean, reinforce, bypass_mode, dppo_tv,
// dppo_kl, clip_cov, kl_cov and dro under their upstream names, with
// their default arguments, argument validation, metrics under upstream's
// names, and dLoss/dlogprob for every token (respecting the reference's
// stop-gradients), so an external trainer can back-propagate through its
// model with these numbers. The losses that take verl's rollout-correction
// weights (Def.Weighted) read them as the optional input rollout_is_weights.
//
// A loss is split into a backend-neutral part and per-token kernels:
//
//   - Def: name, argument schema (defaults, constructor defaults), inputs.
//     Def.New validates arguments and returns a Loss.
//   - Loss.Plan: for one batch, the terms to evaluate — each a Kernel (the
//     per-token math, parameters in exported fields) over a set of rows with
//     an aggregation mode and a gradient coefficient — and a Finish function
//     that turns the kernels' sums into the loss value and metrics.
//   - the CPU backend (Loss.Eval) evaluates the terms with tokens.Batch.Eval,
//     one generic driver for every loss. Another backend implements the
//     same kernels and reuses Plan and Finish unchanged.
package loss

import (
	"fmt"
	"math"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// Def is the backend-neutral definition of a policy loss.
type Def struct {
	// Name is the upstream registry name.
	Name string
	// Params is the argument schema (every loss also has "backend").
	Params args.Schema
	// Inputs are the canonical inputs read besides logprob (upstream's
	// _select_keys, in order).
	Inputs []string
	// GradAfterSums says the gradient depends on sums over the whole batch
	// (Outcome.GradTerms): a batch in windows needs a pass for the sums
	// before the pass that writes the gradient.
	GradAfterSums bool
	// Weighted losses also take the optional per-token input
	// rollout_is_weights (verl's rollout correction): the per-token loss is
	// multiplied by the weight before aggregation, a constant for the
	// gradient. A batch with weights is refused by the other losses.
	Weighted bool
	// CPUOnly losses have no device kernels: a device evaluator refuses
	// them (geo_mean's gradient needs row sums after the token pass,
	// bypass_mode runs the rollout correction in its plan).
	CPUOnly bool
	// build validates resolved arguments and returns the planner.
	build func(v args.Values) (planner, error)
}

// planner prepares one evaluation of a configured loss.
type planner interface {
	plan(b *tokens.Batch) (*Plan, error)
}

// Plan is one evaluation of a loss on one batch: the terms to evaluate and
// what to make of their sums.
type Plan struct {
	Terms  []tokens.Term
	Finish func(res []tokens.TermResult) (Outcome, error)
}

// Outcome is what Finish returns.
type Outcome struct {
	Loss    float64
	Metrics agg.Metrics
	// GradTerms, when set, are evaluated after Finish to write the gradient:
	// losses whose gradient depends on batch-level sums (dpo) use them.
	GradTerms []tokens.Term
}

// Kernel is a per-token kernel that also turns its sums into its aggregate
// value and metrics (backend-neutral: every backend producing the same sums
// shares it).
type Kernel interface {
	tokens.Kernel
	Summary(mode agg.Mode, r tokens.TermResult) (float64, agg.Metrics)
}

// Result is the value and metrics of an evaluation; the gradient is written
// into the caller's buffer.
type Result struct {
	Loss    float64
	Metrics agg.Metrics
}

// Loss is a configured policy loss: validated arguments, ready to evaluate.
// It holds no per-evaluation state and may be used concurrently.
type Loss struct {
	Def  *Def
	Args args.Values
	p    planner
}

// backendParam is the argument every loss has: it selects the key mapper.
var backendParam = args.Param{Name: "backend", Kind: args.String, Ctor: "verl", Choices: []string{"verl", "tinker"},
	Doc: "trainer backend whose column names the loss reads"}

// Schema returns the full argument schema, backend included.
func (d *Def) Schema() args.Schema { return append(args.Schema{backendParam}, d.Params...) }

// DefaultArgs returns upstream's default_args() dict.
func (d *Def) DefaultArgs() args.Values { return d.Schema().Defaults() }

// New validates a user argument dict (nil: default_args) and returns the
// configured loss; keys the dict omits take the constructor defaults.
func (d *Def) New(user args.Values) (*Loss, error) {
	v, err := d.Schema().Resolve(user)
	if err != nil {
		return nil, fmt.Errorf("policy loss %s: %w", d.Name, err)
	}
	p, err := d.build(v)
	if err != nil {
		return nil, fmt.Errorf("policy loss %s: %w", d.Name, err)
	}
	return &Loss{Def: d, Args: v, p: p}, nil
}

// RespectOwnAggMode is the opt-in argument fixing quirk Q-05 (see FromConfig).
const RespectOwnAggMode = "respect_own_loss_agg_mode"

// FromConfig resolves arguments the way Trinity's config does and returns the
// loss: a nil user dict becomes default_args(); then, if the dict has a
// loss_agg_mode key, it is overwritten with the algorithm-wide
// algorithm.loss_agg_mode (upstream default "token-mean"). This is why GSPO,
// whose default_args say seq-mean-token-mean, runs with token-mean upstream
// (quirk Q-05); a loss with the argument respect_own_loss_agg_mode=true keeps
// its own loss_agg_mode instead.
func (d *Def) FromConfig(user args.Values, algoLossAggMode string) (*Loss, error) {
	if user == nil {
		user = d.DefaultArgs()
	}
	if _, has := user["loss_agg_mode"]; has {
		if own, _ := user[RespectOwnAggMode].(bool); !own {
			user = args.Overlay(user, args.Values{"loss_agg_mode": algoLossAggMode})
		}
	}
	return d.New(user)
}

// Name returns the loss's registry name.
func (l *Loss) Name() string { return l.Def.Name }

// Plan checks the batch's inputs and prepares one evaluation.
func (l *Loss) Plan(b *tokens.Batch) (*Plan, error) {
	if b.Rows.N() == 0 {
		return nil, schema.BadInputf("policy loss %s: empty batch", l.Def.Name)
	}
	if err := b.Require(append([]string{tokens.LogProb}, l.Def.Inputs...)...); err != nil {
		return nil, fmt.Errorf("policy loss %s: %w", l.Def.Name, err)
	}
	if b.Has(tokens.RolloutISWeights) && !l.Def.Weighted {
		return nil, schema.BadInputf("policy loss %s does not take %s", l.Def.Name, tokens.RolloutISWeights)
	}
	return l.p.plan(b)
}

// Eval evaluates the loss on the CPU; grad (length b.Rows.Tokens()) receives
// dLoss/dlogprob for every token. All-masked rows or batches give the
// reference's values (0 for masked means), never a panic.
func (l *Loss) Eval(b *tokens.Batch, grad []float64) (Result, error) {
	return l.EvalOn(tokens.CPU, b, grad)
}

// single is the planner of a loss that is one kernel over all rows;
// global, when set, selects verl's aggregation (see globalParams).
type single struct {
	k      Kernel
	mode   agg.Mode
	global *agg.Global
}

func (s single) plan(*tokens.Batch) (*Plan, error) {
	return &Plan{
		Terms: []tokens.Term{{Kernel: s.k, Rows: tokens.AllRows, Mode: s.mode, Coef: 1, Global: s.global}},
		Finish: func(res []tokens.TermResult) (Outcome, error) {
			v, m := s.k.Summary(s.mode, res[0])
			return Outcome{Loss: v, Metrics: m}, nil
		},
	}, nil
}

// Helpers shared by the kernels and argument checks.

// notMinusOne is the range of a coefficient upstream divides by as 1 + x:
// a Python float division by 0 raises (sppo), a tensor's makes every
// output non-finite (opmd).
const notMinusOne schema.Range = "(-inf,-1)∪(-1,inf)"

// aggParam is the loss_agg_mode argument with the given defaults.
func aggParam(def string) args.Param {
	return args.Param{Name: "loss_agg_mode", Kind: args.String, Ctor: def, Default: def, InDefaults: true,
		Choices: agg.ModeNames(),
		Doc:     "how per-token losses are reduced to a scalar"}
}

// globalParams are verl's global_batch_info (agg.Global) as arguments of
// the losses that take them. Setting any of them (dp_size=1 included)
// aggregates with verl's agg_loss — the given global denominators, local
// values for the others; with none set the loss aggregates as Trinity's
// aggregate_loss.
var globalParams = args.Schema{
	{Name: "dp_size", Kind: args.Int, Range: schema.AtLeast1, Nullable: true,
		Doc: "verl aggregation: data-parallel world size D (the loss is multiplied by D)"},
	{Name: "batch_num_tokens", Kind: args.Float, Range: schema.Positive, Nullable: true,
		Doc: "verl aggregation: token-mean denominator, the mask count of the whole mini-batch over all ranks"},
	{Name: "global_batch_size", Kind: args.Float, Range: schema.Positive, Nullable: true,
		Doc: "verl aggregation: seq-mean denominator, sequences per optimiser step over all ranks"},
	{Name: "loss_scale_factor", Kind: args.Float, Range: schema.Positive, Nullable: true,
		Doc: "verl aggregation: seq-mean-token-sum-norm divisor (default: the batch's padded width)"},
}

// global returns the verl aggregation the arguments select (nil: none);
// a loss's argument verl=true selects it too.
func global(v args.Values) *agg.Global {
	dp, hasDP := v["dp_size"].(int64)
	n, hasN := v.OptFloat("batch_num_tokens")
	g, hasG := v.OptFloat("global_batch_size")
	f, hasF := v.OptFloat("loss_scale_factor")
	if !hasDP && !hasN && !hasG && !hasF && !v.Bool("verl") {
		return nil
	}
	return &agg.Global{DPSize: int(dp), BatchNumTokens: n, GlobalBatchSize: g, LossScaleFactor: f}
}

// verlGlobal is global(v) for the losses that only exist in verl: they
// always aggregate with verl's agg_loss (dp_size 1 when no field is set).
func verlGlobal(v args.Values) *agg.Global {
	if g := global(v); g != nil {
		return g
	}
	return &agg.Global{}
}

// actorClipParams are the clip_range arguments of a verl-only loss:
// ActorConfig's clip_ratio 0.2 also where the user dict omits it, the
// low/high bounds null (falling back to it).
func actorClipParams() args.Schema {
	p := clipParams(0.2, nil, nil, false)
	p[0].Ctor = 0.2
	return p
}

// actorParam is a float argument of a verl-only loss under verl's config
// name, with verl's default.
func actorParam(name string, def float64, r schema.Range, doc string) args.Param {
	return args.Param{Name: name, Kind: args.Float, Ctor: def, Default: def, InDefaults: true, Range: r, Doc: doc}
}

// verlParam is the argument selecting verl's version of a loss that
// Trinity also has; doc lists what changes.
func verlParam(doc string) args.Param {
	return args.Param{Name: "verl", Kind: args.Bool, Ctor: false,
		Doc: "compute as verl's core_algos (rollout-correction spec §6): " + doc + "; verl's agg_loss; metrics pg_clipfrac, ppo_kl, pg_clipfrac_lower"}
}

// verlMetrics are the metrics of verl's clipped losses.
func verlMetrics(loss, clipfrac, kl float64) agg.Metrics {
	return agg.Metrics{"pg_clipfrac": clipfrac, "ppo_kl": kl, "pg_clipfrac_lower": 0, "pg_loss": loss}
}

// weight returns the rollout IS weight of token t (1 without weights).
func weight(w []float64, t int) float64 {
	if w == nil {
		return 1
	}
	return w[t]
}

// mode parses a validated loss_agg_mode argument.
func mode(v args.Values, name string) agg.Mode {
	m, _ := agg.ParseMode(v.String(name))
	return m
}

// b2f is Iverson's bracket, without a branch (a conditional move).
func b2f(c bool) float64 { return pick(c, 1, 0) }

// pick returns x where c holds, else y, without a branch: Go compiles a
// conditional float assignment to a jump, and an integer one to a
// conditional move, so the choice is made on the bits. The token loops use
// it for conditions whose outcome varies from token to token (the sign of
// the advantage), where a mispredicted jump costs more than the arithmetic
// around it.
func pick(c bool, x, y float64) float64 {
	bx, by := math.Float64bits(x), math.Float64bits(y)
	if c {
		by = bx
	}
	return math.Float64frombits(by)
}

// rowMeanLogRatio is upstream's masked_mean(lp - old, m, axis=-1) of one row.
func rowMeanLogRatio(r *tokens.Row) float64 {
	s := 0.0
	for t, m := range r.Mask {
		if m != 0 {
			s += (r.LP[t] - r.Old[t]) * m
		}
	}
	return s / (r.Count + agg.Eps)
}

// sigmoid is the logistic function.
func sigmoid(x float64) float64 { return 1 / (1 + exp(-x)) }

// bad is a shorthand for argument validation errors.
func bad(format string, a ...any) error { return schema.BadInputf(format, a...) }
