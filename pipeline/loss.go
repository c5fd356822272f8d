package pipeline

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/apache/arrow/go/v17/arrow/array"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/loss"
	"github.com/rftpipe/rftpipe/stages/objective"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// LossStage is the loss step: the trainer's actor objective over the store
// as one batch. A statistics pass gathers the batch's totals (rows, mask
// counts, width: what the aggregation modes divide by); the streaming pass
// adds up the terms' sums batch by batch and writes grad_logprob
// (dLoss/dlogprob) as it goes; Finish turns the sums into the loss and its
// metrics. A loss whose gradient needs the batch's sums (dpo) takes one more
// statistics pass for them. bypass_mode, which runs the rollout correction
// on its inputs first, gathers the totals of the rejection-sampled mask
// (and the weights' batch mean) in the statistics pass and corrects each
// batch before evaluating it (loss.Stream).
type LossStage struct {
	obj *objective.Objective
	// run is the objective evaluated: obj, with bypass_mode's streamed loss.
	run    *objective.Objective
	stream *loss.Stream
	ev     tokens.Evaluator
	// cols overrides schema.Input's columns: input → store column.
	cols map[string]string
	step int64

	totals tokens.Totals
	eval   *objective.Eval
	// inFlight are the batches applied and not completed, oldest first.
	inFlight []lossWindow
	res      *objective.Result
	tokens   int
}

// NewLoss returns the loss step of o, evaluated by ev (tokens.CPU or a
// device). cols maps inputs to store columns where schema.Input's columns do
// not fit; step is the training step every row is at (mix_chord's
// schedule).
func NewLoss(o *objective.Objective, ev tokens.Evaluator, cols map[string]string, step int64) *LossStage {
	l := &LossStage{obj: o, run: o, ev: ev, cols: cols, step: step}
	if s, p := o.Policy.Stream(); s != nil {
		run := *o
		run.Policy = p
		l.run, l.stream = &run, s
	}
	return l
}

// Name implements Stage.
func (l *LossStage) Name() string { return "loss/" + l.obj.Policy.Name() }

// Needs implements Stage.
func (l *LossStage) Needs() Needs {
	n := Needs{Columns: []string{schema.ActionMask}, Passes: 1, Writes: []string{schema.GradLogprob},
		CrossBatch: "the loss is taken over the store as one trainer batch (its aggregation divides by the whole store's token and row totals)"}
	switch {
	case l.obj.Policy.Def.GradAfterSums:
		n.Passes = 2 // the second pass evaluates: every input
	case l.stream != nil:
		// the statistics passes run the rollout correction or the token
		// selection: the policy loss's inputs
		n.Passes = l.stream.Passes()
		n.PassColumns = append([]string{schema.ActionMask, schema.ExpertMask}, slices.Sorted(maps.Values(l.cols))...)
		for _, in := range append([]string{tokens.LogProb}, l.obj.Policy.Def.Inputs...) {
			n.PassInputs = append(n.PassInputs, schema.Input(in))
		}
	default:
		n.PassColumns = []string{schema.ActionMask, schema.ExpertMask, l.cols[tokens.ActionMask], l.cols[tokens.ExpertMask]}
	}
	for _, in := range schema.Inputs() {
		if objective.Reads(string(in)) {
			n.Optional = append(n.Optional, in.Columns()...)
		}
	}
	for _, c := range l.cols {
		n.Optional = append(n.Optional, c)
	}
	return n
}

// column returns the store column input is read from, "" when none.
func (l *LossStage) column(b *Batch, input string) string {
	if c, ok := l.cols[input]; ok {
		return c
	}
	return inputColumn(b, input)
}

// inputColumn returns the store column of b that input (a schema.Input name) is
// read from by default, "" when the store has none.
func inputColumn(b *Batch, input string) string {
	for _, c := range schema.Input(input).Columns() {
		if b.Has(c) {
			return c
		}
	}
	return ""
}

// window returns the batch as a window of the loss's batch; with raw,
// when the store holds every per-token input but action_mask as
// list<float32>, those are set as stored (tokens.Batch.Set32), not
// converted.
func (l *LossStage) window(b *Batch, raw bool) (*tokens.Batch, error) {
	rows, err := b.Rows()
	if err != nil {
		return nil, err
	}
	tb := tokens.New(rows)
	var ins, cols []string // the per-token inputs read and their columns
	for _, si := range schema.Inputs() {
		in := string(si)
		col := l.column(b, in)
		if _, named := l.cols[in]; col == "" || !named && !objective.Reads(in) {
			continue
		}
		if !b.Has(col) {
			return nil, schema.Errorf(b.File, -1, col, "no such column (--col %s=%s)", in, col)
		}
		if si.PerRow() { // expert_mask, a per-row flag
			flags, err := rowFlags(b, col)
			if err != nil {
				return nil, err
			}
			if err := tb.SetExpertMask(flags); err != nil {
				return nil, err
			}
			continue
		}
		ins, cols = append(ins, in), append(cols, col)
	}
	if err := l.setInputs(b, tb, ins, cols, raw); err != nil {
		return nil, err
	}
	steps := make([]int64, b.Len())
	for i := range steps {
		steps[i] = l.step
	}
	return tb, tb.SetStep(steps)
}

// setInputs sets the per-token inputs ins (read from cols) of window tb,
// converted to float64; with raw, when every one but action_mask is a
// list<float32> column, those as stored (tokens.Batch.Set32).
func (l *LossStage) setInputs(b *Batch, tb *tokens.Batch, ins, cols []string, raw bool) error {
	stored := make([][]float32, len(ins))
	for i, in := range ins {
		if !raw || in == tokens.ActionMask {
			continue
		}
		v, ok, err := b.Float32Tokens(cols[i])
		if err != nil {
			return err
		}
		if !ok {
			stored = make([][]float32, len(ins))
			break
		}
		stored[i] = v
	}
	var convert []string // the columns converted
	for i := range ins {
		if stored[i] == nil {
			convert = append(convert, cols[i])
		}
	}
	vals, err := b.TokensOf(convert...)
	if err != nil {
		return err
	}
	for i, in := range ins {
		if stored[i] != nil {
			err = tb.Set32(in, stored[i])
		} else {
			err = tb.Set(in, vals[0])
			vals = vals[1:]
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// rowFlags reads a per-row bool (or integer 0/1) column.
func rowFlags(b *Batch, col string) ([]bool, error) {
	a := b.Column(col)
	out := make([]bool, b.Len())
	for i := range out {
		if a.IsNull(i) {
			return nil, b.Errorf(i, col, "null flag")
		}
		switch v := a.(type) {
		case *array.Boolean:
			out[i] = v.Value(i)
		case *array.Int32:
			out[i] = v.Value(i) != 0
		case *array.Int64:
			out[i] = v.Value(i) != 0
		default:
			return nil, schema.Errorf(b.File, -1, col, "has type %s, want bool", a.DataType())
		}
	}
	return out, nil
}

// Observe implements Observer: pass 0 gathers the totals, pass 1 (losses
// whose gradient needs the batch's sums) the sums; a streamed loss
// (loss.Stream) observes its own passes.
func (l *LossStage) Observe(pass int, b *Batch) error {
	if pass == 0 {
		t, err := l.totalsOf(b)
		l.totals.Add(t)
		if err != nil || l.stream == nil {
			return err
		}
		tb, err := l.window(b, l.stream.Float32())
		if err != nil {
			return err
		}
		return l.wrap(b, l.stream.Observe(0, tb))
	}
	if l.stream != nil && pass < l.stream.Passes() {
		tb, err := l.window(b, l.stream.Float32())
		if err != nil {
			return err
		}
		return l.wrap(b, l.stream.Observe(pass, tb))
	}
	tb, err := l.window(b, false)
	if err != nil {
		return err
	}
	if err := l.start(tb, b); err != nil {
		return err
	}
	return l.wrap(b, l.eval.Window(tb, make([]float64, tb.Rows.Tokens())))
}

// totalsOf returns the totals of b's rows: from the mask and the expert
// flags alone.
func (l *LossStage) totalsOf(b *Batch) (tokens.Totals, error) {
	rows, err := b.Rows()
	if err != nil {
		return tokens.Totals{}, err
	}
	tb := tokens.New(rows)
	if col := l.column(b, tokens.ActionMask); col != "" {
		mask, err := b.Tokens(col)
		if err != nil {
			return tokens.Totals{}, err
		}
		if err := tb.Set(tokens.ActionMask, mask); err != nil {
			return tokens.Totals{}, err
		}
	}
	if col := l.column(b, tokens.ExpertMask); col != "" {
		flags, err := rowFlags(b, col)
		if err != nil {
			return tokens.Totals{}, err
		}
		if err := tb.SetExpertMask(flags); err != nil {
			return tokens.Totals{}, err
		}
	}
	return tokens.TotalsOf(tb), nil
}

// start windows tb into the batch and starts the evaluation at the first
// window.
func (l *LossStage) start(tb *tokens.Batch, b *Batch) error {
	if err := tb.SetWindow(int(b.Row), l.totals); err != nil {
		return err
	}
	if l.stream != nil {
		if err := l.stream.Window(tb); err != nil {
			return l.wrap(b, err)
		}
	}
	if l.eval != nil {
		return nil
	}
	e, err := l.run.Start(l.ev, tb)
	if err != nil {
		return l.wrap(b, err)
	}
	l.eval = e
	return nil
}

// Apply implements Applier: it starts the evaluation of the batch's sums
// and gradient, and completes it unless Deferred.
func (l *LossStage) Apply(b *Batch) error {
	tb, err := l.window(b, false)
	if err != nil {
		return err
	}
	if err := l.start(tb, b); err != nil {
		return err
	}
	grad := make([]float64, tb.Rows.Tokens())
	if l.obj.Policy.Def.GradAfterSums {
		if err := l.finish(); err != nil {
			return err
		}
		if err := l.eval.GradWindow(tb, grad); err != nil {
			return l.wrap(b, err)
		}
		l.tokens += len(grad)
		return b.SetList(schema.GradLogprob, grad)
	}
	w, err := l.eval.StartWindow(tb, grad)
	if err != nil {
		return l.wrap(b, err)
	}
	l.inFlight = append(l.inFlight, lossWindow{b: b, w: w, grad: grad})
	if !l.Deferred() {
		return l.Complete(b)
	}
	return nil
}

// lossWindow is a batch whose evaluation is started and not completed.
type lossWindow struct {
	b    *Batch
	w    *objective.Window
	grad []float64
}

// Deferred implements Completer: on a device (a tokens.Starter) the
// batch's evaluation is left in flight by Apply, so it runs while the
// engine reads and starts the next batch, and its gradient is written while
// the next one computes. A loss whose gradient needs the batch's sums (dpo)
// evaluates its gradient at once, and so does a streamed loss (bypass_mode,
// m2po: CPU only), whose kernel is the current window's.
func (l *LossStage) Deferred() bool {
	_, ok := l.ev.(tokens.Starter)
	return ok && !l.obj.Policy.Def.GradAfterSums && l.stream == nil
}

// Complete implements Completer: it waits for the evaluation of b (the
// earliest batch applied and not yet completed), adds its sums in batch
// order and sets its grad_logprob.
func (l *LossStage) Complete(b *Batch) error {
	if len(l.inFlight) == 0 || l.inFlight[0].b != b {
		return fmt.Errorf("%s: loss: batch at row %d completed out of order", b.File, b.Row)
	}
	w := l.inFlight[0]
	l.inFlight = slices.Delete(l.inFlight, 0, 1)
	if err := w.w.Wait(); err != nil {
		return l.wrap(b, err)
	}
	l.tokens += len(w.grad)
	return b.SetList(schema.GradLogprob, w.grad)
}

func (l *LossStage) finish() error {
	if l.res != nil {
		return nil
	}
	if l.eval == nil {
		return schema.BadInputf("the store has no rows")
	}
	r, err := l.eval.Finish()
	if err != nil {
		return err
	}
	l.res = &r
	return nil
}

// Finish implements Finisher: the loss's metrics.
func (l *LossStage) Finish(res *Result) error {
	if err := l.finish(); err != nil {
		return err
	}
	res.Metrics.Merge("", l.res.Metrics)
	return nil
}

// Result returns the objective's value and metrics (after the job).
func (l *LossStage) Result() objective.Result { return *l.res }

// Tokens returns the number of response tokens evaluated.
func (l *LossStage) Tokens() int { return l.tokens }

// wrap names the store in an error about the batch and says how to provide
// a missing input.
func (l *LossStage) wrap(b *Batch, err error) error {
	if err == nil {
		return nil
	}
	for _, in := range schema.Inputs() {
		if missing(err, string(in)) {
			return fmt.Errorf("%s: %w (the store has no %s column: add one, or name the column with --col %s=COLUMN)", b.File, err, in.Columns()[0], in)
		}
	}
	return fmt.Errorf("%s: %w", b.File, err)
}

// missing reports whether err says the batch lacks input (first).
func missing(err error, input string) bool {
	var me *schema.MissingInputError
	return errors.As(err, &me) && me.Column == input
}
