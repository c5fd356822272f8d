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
	"slices"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/entropy"
	"github.com/rftpipe/rftpipe/stages/kl"
	"github.com/rftpipe/rftpipe/stages/loss"
	"github.com/rftpipe/rftpipe/stages/parallel"
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

// Reads reports whether a loss step reads input (a tokens input name) when
// a batch has it: every input but the teacher's log-probs and the critic's
// values, which are inputs of advantage fns (on-policy distillation, GAE)
// and never of a loss term. A loss step leaves those two unread, so a store
// whose rows lack them (a Trinity buffer's multi-step rows) still
// evaluates.
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
	free     [][]float64 // gradient buffers of the KL and entropy terms, for reuse
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
// unless NeedsGradPass. It is StartWindow, then Wait.
func (e *Eval) Window(b *tokens.Batch, grad []float64) error {
	w, err := e.StartWindow(b, grad)
	if err != nil {
		return err
	}
	return w.Wait()
}

// Window is one window of rows whose terms StartWindow has started.
type Window struct {
	e           *Eval
	grad        []float64
	pg, kl, ent tokens.Pending
	// the KL and entropy terms' gradients, until Wait
	klGrad, entGrad []float64
}

// StartWindow starts the evaluation of one window of rows: the policy
// loss's terms, the KL term and the entropy term. On a tokens.Starter (a
// device) the three are queued and StartWindow returns before they are
// done, so the caller can prepare the next window meanwhile; on another
// evaluator they are evaluated before it returns. Wait adds the window's
// sums and writes grad; b and grad must stay untouched until then. Wait
// for windows in the order they were started: the sums are added in window
// order, so a run gives the same bits whether its windows overlap or not.
func (e *Eval) StartWindow(b *tokens.Batch, grad []float64) (*Window, error) {
	w := &Window{e: e, grad: grad}
	var err error
	if w.pg, err = e.start(b, grad, e.plan.Terms...); err != nil {
		return nil, fmt.Errorf("policy loss %s: %w", e.o.Policy.Name(), err)
	}
	if t, ok, err := e.o.KL.Term(b, e.o.Mode); err != nil {
		return nil, err
	} else if ok {
		w.klGrad = e.buf(len(grad))
		if w.kl, err = e.start(b, w.klGrad, t); err != nil {
			return nil, fmt.Errorf("KL loss %s: %w", e.o.KL.Name, err)
		}
	}
	if e.useEnt {
		if t, ok, err := e.o.Entropy.Term(b, e.o.Mode); err != nil {
			return nil, err
		} else if ok {
			w.entGrad = e.buf(len(grad))
			if w.ent, err = e.start(b, w.entGrad, t); err != nil {
				return nil, fmt.Errorf("entropy loss %s: %w", e.o.Entropy.Name, err)
			}
		}
	}
	return w, nil
}

// Wait waits for the window's terms, adds their sums to the evaluation's
// and writes the window's gradient: the policy loss's plus the KL term's.
func (w *Window) Wait() error {
	e := w.e
	res, err := w.pg.Wait()
	if err != nil {
		return fmt.Errorf("policy loss %s: %w", e.o.Policy.Name(), err)
	}
	if e.pg == nil {
		e.pg = res
	} else {
		addSums(e.pg, res)
	}
	if w.kl != nil {
		r, err := w.kl.Wait()
		if err != nil {
			return fmt.Errorf("KL loss %s: %w", e.o.KL.Name, err)
		}
		addInto(w.grad, w.klGrad)
		e.kl = accumulate(e.kl, r[0])
		e.free = append(e.free, w.klGrad)
	}
	if w.ent != nil {
		r, err := w.ent.Wait()
		if err != nil {
			return fmt.Errorf("entropy loss %s: %w", e.o.Entropy.Name, err)
		}
		e.ent = accumulate(e.ent, r[0])
		e.free = append(e.free, w.entGrad) // its gradient is not the loss's (no log-prob dependence)
	}
	return nil
}

// start starts the evaluation of terms over b: queued on a tokens.Starter,
// else evaluated now.
func (e *Eval) start(b *tokens.Batch, grad []float64, terms ...tokens.Term) (tokens.Pending, error) {
	if s, ok := e.ev.(tokens.Starter); ok {
		return s.Start(b, grad, terms...)
	}
	res, err := e.ev.Eval(b, grad, terms...)
	if err != nil {
		return nil, err
	}
	return evaluated(res), nil
}

// evaluated is the Pending of an evaluation already done.
type evaluated []tokens.TermResult

func (r evaluated) Wait() ([]tokens.TermResult, error) { return r, nil }

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
		defer func() { e.free = append(e.free, g) }()
		if _, err := e.ev.Eval(b, g, t); err != nil {
			return fmt.Errorf("KL loss %s: %w", e.o.KL.Name, err)
		}
		addInto(grad, g)
	}
	return nil
}

// addInto adds src into dst elementwise (the KL term's gradient into the
// policy loss's), over the cores.
func addInto(dst, src []float64) {
	parallel.Spans(len(src), parallel.SpanSize, func(lo, hi int) {
		for i, v := range src[lo:hi] {
			dst[lo+i] += v
		}
	})
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

// buf returns a gradient buffer of n values, reused from e.free when one
// there is large enough (a window returns its buffers at Wait). A miss
// drops the smallest free buffer, so the list never holds more buffers
// than are in use at once, however the windows' sizes grow.
func (e *Eval) buf(n int) []float64 {
	small := -1
	for i, b := range e.free {
		if cap(b) >= n {
			e.free = slices.Delete(e.free, i, i+1)
			return b[:n]
		}
		if small < 0 || cap(b) < cap(e.free[small]) {
			small = i
		}
	}
	if small >= 0 {
		e.free = slices.Delete(e.free, small, small+1)
	}
	return make([]float64, n)
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
	spec, err := loss.Default().Get(c.PolicyLoss)
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
	pl, err := spec.New.FromConfig(args.Overlay(spec.New.DefaultArgs(), c.Args), mode)
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
