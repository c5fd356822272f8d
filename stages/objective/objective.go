// Package objective is the trainer's actor objective, as Trinity-RFT's
// trainer composes it from its parts:
//
//	final_loss = pg_loss − entropy_coef·entropy + kl_coef·kl
//
// with the metrics published under actor/…, and dLoss/dlogprob per token
// (the entropy term does not depend on the log-probs, so it adds no
// gradient). `rftpipe loss`, the benchmarks and the GPU tests evaluate it
// through this package.
//
// An evaluation covers one trainer batch, which may be handed over in
// windows of rows (a store streamed record batch by record batch): every
// term is a sum over rows, so the engine first gathers the batch's totals
// (tokens.Totals: rows, mask counts, width), then evaluates window after
// window and adds the sums in window order, and Finish turns them into the
// loss. A policy loss whose gradient depends on batch-level sums (dpo) needs
// one more pass over the windows for the gradient (NeedsGradPass).
package objective

import (
	"fmt"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/entropy"
	"github.com/rftpipe/rftpipe/stages/kl"
	"github.com/rftpipe/rftpipe/stages/loss"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// Objective is a configured actor objective.
type Objective struct {
	Policy  *loss.Loss
	KL      *kl.Fn      // kl_loss_fn (kl.None: no term)
	Entropy *entropy.Fn // entropy_loss_fn; its term is evaluated when the batch has an entropy input or its coefficient is not 0
	// Mode is the loss_agg_mode of the KL and entropy terms.
	Mode agg.Mode
}

// Reads reports whether some term of an objective reads input (a tokens
// input name) when a batch has it. The teacher's log-probs and the critic's
// values are inputs of advantage fns (on-policy distillation, GAE), never
// of a loss term; a loss step leaves them unread, so a store whose rows
// lack them (a Trinity buffer's multi-step rows) still evaluates.
func Reads(input string) bool {
	return input != tokens.TeacherLogProb && input != tokens.Values
}

// Result is the objective's value and metrics over a whole batch.
type Result struct {
	Loss    float64
	Metrics agg.Metrics
}

// Eval is one evaluation in progress. Its methods must be called in order:
// Window for every window, Finish, then (if NeedsGradPass) GradWindow for
// every window again.
type Eval struct {
	o        *Objective
	ev       tokens.Evaluator
	plan     *loss.Plan
	pg       []tokens.TermResult
	kl, ent  *tokens.TermResult
	useEnt   bool
	gradPass []tokens.Term
	scratch  []float64
}

// Start prepares an evaluation; first is the first window (with
// SetWindow's totals, or the whole batch).
func (o *Objective) Start(ev tokens.Evaluator, first *tokens.Batch) (*Eval, error) {
	p, err := o.Policy.Plan(first)
	if err != nil {
		return nil, err
	}
	e := &Eval{o: o, ev: ev, plan: p, useEnt: first.Has(tokens.Entropy) || o.Entropy.Coef != 0}
	return e, nil
}

// Window evaluates one window of rows: it adds the window's sums and writes
// the window's dLoss/dlogprob into grad (length b.Rows.Tokens()), final
// unless NeedsGradPass.
func (e *Eval) Window(b *tokens.Batch, grad []float64) error {
	name := e.o.Policy.Name()
	res, err := e.ev.Eval(b, grad, e.plan.Terms...)
	if err != nil {
		return fmt.Errorf("policy loss %s: %w", name, err)
	}
	if e.pg == nil {
		e.pg = res
	} else {
		addSums(e.pg, res)
	}
	if t, ok, err := e.o.KL.Term(b, e.o.Mode); err != nil {
		return err
	} else if ok {
		g := e.buf(len(grad))
		r, err := e.ev.Eval(b, g, t)
		if err != nil {
			return fmt.Errorf("KL loss %s: %w", e.o.KL.Name, err)
		}
		for i, v := range g {
			grad[i] += v
		}
		e.kl = accumulate(e.kl, r[0])
	}
	if e.useEnt {
		if t, ok, err := e.o.Entropy.Term(b, e.o.Mode); err != nil {
			return err
		} else if ok {
			r, err := e.ev.Eval(b, e.buf(len(grad)), t)
			if err != nil {
				return fmt.Errorf("entropy loss %s: %w", e.o.Entropy.Name, err)
			}
			e.ent = accumulate(e.ent, r[0])
		}
	}
	return nil
}

// Finish turns the sums of every window into the loss and its metrics.
func (e *Eval) Finish() (Result, error) {
	out, err := e.plan.Finish(e.pg)
	if err != nil {
		return Result{}, fmt.Errorf("policy loss %s: %w", e.o.Policy.Name(), err)
	}
	e.gradPass = out.GradTerms
	m := agg.Metrics{}
	m.Merge("actor", out.Metrics)
	final := out.Loss
	if e.kl != nil {
		v, km := e.o.KL.Summary(e.o.Mode, *e.kl)
		final += v
		m.Merge("actor", km)
	}
	if e.ent != nil {
		v, em := e.o.Entropy.Summary(e.o.Mode, *e.ent)
		final -= v // an entropy bonus
		m.Merge("actor", em)
	}
	m["actor/final_loss"] = final
	return Result{Loss: final, Metrics: m}, nil
}

// NeedsGradPass reports, after Finish, whether the gradient needs a second
// pass over the windows (GradWindow).
func (e *Eval) NeedsGradPass() bool { return e.gradPass != nil }

// GradWindow writes one window's final dLoss/dlogprob into grad: the policy
// loss's batch-level gradient terms plus the KL term's gradient.
func (e *Eval) GradWindow(b *tokens.Batch, grad []float64) error {
	if _, err := e.ev.Eval(b, grad, e.gradPass...); err != nil {
		return fmt.Errorf("policy loss %s: %w", e.o.Policy.Name(), err)
	}
	if t, ok, err := e.o.KL.Term(b, e.o.Mode); err != nil {
		return err
	} else if ok {
		g := e.buf(len(grad))
		if _, err := e.ev.Eval(b, g, t); err != nil {
			return fmt.Errorf("KL loss %s: %w", e.o.KL.Name, err)
		}
		for i, v := range g {
			grad[i] += v
		}
	}
	return nil
}

// Eval evaluates the objective over one whole batch; grad receives
// dLoss/dlogprob per token.
func (o *Objective) Eval(ev tokens.Evaluator, b *tokens.Batch, grad []float64) (Result, error) {
	e, err := o.Start(ev, b)
	if err != nil {
		return Result{}, err
	}
	if err := e.Window(b, grad); err != nil {
		return Result{}, err
	}
	res, err := e.Finish()
	if err != nil {
		return Result{}, err
	}
	if e.NeedsGradPass() {
		if err := e.GradWindow(b, grad); err != nil {
			return Result{}, err
		}
	}
	return res, nil
}

func (e *Eval) buf(n int) []float64 {
	if cap(e.scratch) < n {
		e.scratch = make([]float64, n)
	}
	return e.scratch[:n]
}

// addSums adds the sums of res to acc, term by term.
func addSums(acc, res []tokens.TermResult) {
	for i := range acc {
		for j, v := range res[i].Sums {
			acc[i].Sums[j] += v
		}
	}
}

func accumulate(acc *tokens.TermResult, r tokens.TermResult) *tokens.TermResult {
	if acc == nil {
		return &tokens.TermResult{Sums: append([]float64(nil), r.Sums...), Stats: r.Stats}
	}
	addSums([]tokens.TermResult{*acc}, []tokens.TermResult{r})
	return acc
}

// Config names the parts of an objective and their arguments, as `rftpipe
// loss` flags give them.
type Config struct {
	// PolicyLoss and Args: the policy loss and its arguments over its
	// default_args.
	PolicyLoss string
	Args       args.Values
	// LossAggMode is algorithm.loss_agg_mode: the KL and entropy terms' mode,
	// and the policy loss's unless it respects its own (loss.FromConfig);
	// "" takes the policy's loss_agg_mode argument, else token-mean.
	LossAggMode string
	// KLLoss and KLCoef: kl_loss_fn ("none": no term) and its coefficient.
	KLLoss string
	KLCoef float64
	// Entropy and EntropyCoef: entropy_loss_fn and its coefficient.
	Entropy     string
	EntropyCoef float64
}

// New configures an objective.
func New(c Config) (*Objective, error) {
	def, err := loss.Default().Get(c.PolicyLoss)
	if err != nil {
		return nil, err
	}
	mode := c.LossAggMode
	if mode == "" {
		mode = "token-mean"
		if m, ok := c.Args["loss_agg_mode"].(string); ok {
			mode = m
		}
	}
	m, err := agg.ParseMode(mode)
	if err != nil {
		return nil, schema.BadInputf("loss_agg_mode: %v", err)
	}
	pl, err := def.FromConfig(args.Overlay(def.DefaultArgs(), c.Args), mode)
	if err != nil {
		return nil, err
	}
	klFn, err := kl.New(c.KLLoss, args.Values{"kl_coef": c.KLCoef})
	if err != nil {
		return nil, err
	}
	entFn, err := entropy.New(c.Entropy, args.Values{"entropy_coef": c.EntropyCoef})
	if err != nil {
		return nil, err
	}
	return &Objective{Policy: pl, KL: klFn, Entropy: entFn, Mode: m}, nil
}
