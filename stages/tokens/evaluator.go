package tokens

import (
	"fmt"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/agg"
)

// Evaluator evaluates terms over a batch with the contract of Batch.Eval:
// the same sums per term, the same gradient. CPU is Batch.Eval; a device
// backend (package gpu) implements the same kernels on an accelerator and
// shares everything else (plans, finishing, metric names) with the CPU path.
type Evaluator interface {
	Eval(b *Batch, grad []float64, terms ...Term) ([]TermResult, error)
}

// Starter is an Evaluator that can leave an evaluation in flight (a device
// queues transfers and kernels): Start returns once the evaluation is
// queued, and Pending.Wait returns what Eval would have, bit for bit. b and
// grad must stay untouched until Wait has returned; grad is written then.
// Several evaluations may be in flight at once.
type Starter interface {
	Evaluator
	Start(b *Batch, grad []float64, terms ...Term) (Pending, error)
}

// Pending is an evaluation Starter.Start has queued.
type Pending interface {
	Wait() ([]TermResult, error)
}

// CPU is the Evaluator of the CPU driver, Batch.Eval.
var CPU Evaluator = cpuEvaluator{}

type cpuEvaluator struct{}

func (cpuEvaluator) Eval(b *Batch, grad []float64, terms ...Term) ([]TermResult, error) {
	return b.Eval(grad, terms...)
}

// TermFn is a loss function that is one term over a batch's rows
// (kl_loss_fn, entropy_loss_fn): Term builds the term (ok false for a
// function with no term), Summary turns its sums into the loss and metrics.
type TermFn interface {
	Term(b *Batch, mode agg.Mode) (t Term, ok bool, err error)
	Summary(mode agg.Mode, r TermResult) (float64, agg.Metrics)
}

// LossOn evaluates f's term over b with ev and writes its gradient into
// grad (length b.Rows.Tokens()); with no term the loss is 0, the metrics
// empty and grad cleared. name prefixes an evaluation error (e.g. "KL loss
// k3").
func LossOn(ev Evaluator, f TermFn, name string, b *Batch, mode agg.Mode, grad []float64) (float64, agg.Metrics, error) {
	t, ok, err := f.Term(b, mode)
	if err != nil || !ok {
		if err == nil && len(grad) != b.Rows.Tokens() {
			err = schema.BadInputf("gradient buffer has %d tokens, the batch has %d", len(grad), b.Rows.Tokens())
		}
		clear(grad)
		return 0, agg.Metrics{}, err
	}
	res, err := ev.Eval(b, grad, t)
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %w", name, err)
	}
	v, m := f.Summary(mode, res[0])
	return v, m, nil
}

// Layout is the assignment of a batch's rows to the terms of one
// evaluation, as Eval makes it: each row goes to the first term whose RowSet
// holds it; a term's Stats cover every row of its RowSet.
type Layout struct {
	// Term is, per row, the index of the term evaluating it (-1: none; its
	// gradient is 0).
	Term []int
	// Stats are the terms' row statistics.
	Stats []Stats
}

// Layout checks the batch against the terms (mask present, expert_mask
// present where a term selects rows by it, verl's global counts present
// where its aggregation needs them: agg.Global.Check) and assigns rows to
// terms.
func (b *Batch) Layout(terms []Term) (Layout, error) {
	if b.counts == nil {
		return Layout{}, &schema.MissingInputError{Column: ActionMask}
	}
	l := Layout{Term: make([]int, b.Rows.N()), Stats: make([]Stats, len(terms))}
	tot := b.Totals()
	for i, t := range terms {
		if t.Rows != AllRows && !tot.Expert {
			return Layout{}, &schema.MissingInputError{Column: ExpertMask}
		}
		if t.Global != nil {
			if err := t.Global.Check(t.Mode); err != nil {
				return Layout{}, err
			}
		}
		l.Stats[i] = Stats{Rows: tot.Rows[t.Rows], Total: tot.Mask[t.Rows], NonEmpty: tot.NonEmpty[t.Rows], Width: tot.Width}
	}
	for r := range l.Term {
		l.Term[r] = -1
		for i, t := range terms {
			if t.Rows.has(b.expert, r) {
				l.Term[r] = i
				break
			}
		}
	}
	return l, nil
}

// RowScale returns Row.Scale and Row.GradScale of row r evaluated by term t
// with statistics st.
func (b *Batch) RowScale(t Term, st Stats, r int) (scale, gradScale float64) {
	var s float64
	if t.Global != nil {
		s = t.Global.Scale(t.Mode, st.NonEmpty, st.Width, st.Total, b.counts[r])
	} else {
		s = agg.Scale(t.Mode, st.Rows, st.Width, st.Total, b.counts[r])
	}
	return s, s * t.Coef
}

// Float32Storage returns an evaluator that stores what a device stores in
// float32 — every per-token input and the gradient — rounded to float32,
// and computes with ev in float64 in between (the row mask counts stay the
// float64 ones, as a device's host plan computes them). On the CPU it is
// the exact answer to float32-stored inputs: the reference a device's
// float32 storage is judged against when a case is ill-conditioned.
func Float32Storage(ev Evaluator) Evaluator { return f32Evaluator{ev} }

type f32Evaluator struct{ ev Evaluator }

func (e f32Evaluator) Eval(b *Batch, grad []float64, terms ...Term) ([]TermResult, error) {
	r := *b
	r.cols = make(map[string][]float64, len(b.cols))
	for name, c := range b.cols {
		out := make([]float64, len(c))
		for i, x := range c {
			out[i] = float64(float32(x))
		}
		r.cols[name] = out
	}
	res, err := e.ev.Eval(&r, grad, terms...)
	for i, g := range grad {
		grad[i] = float64(float32(g))
	}
	return res, err
}
