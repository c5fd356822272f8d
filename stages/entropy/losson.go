package entropy

import (
	"fmt"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// LossOn is Loss with the kernel evaluated by ev: tokens.CPU (what Loss
// does) or a device backend such as package gpu.
func (f *Fn) LossOn(ev tokens.Evaluator, b *tokens.Batch, mode agg.Mode, grad []float64) (float64, agg.Metrics, error) {
	return tokens.LossOn(ev, f, "entropy loss "+f.Name, b, mode, grad)
}

// Term returns the entropy term over b's rows (ok false for the none
// function), after checking b has its inputs.
func (f *Fn) Term(b *tokens.Batch, mode agg.Mode) (t tokens.Term, ok bool, err error) {
	if f.Kind == None {
		return t, false, nil
	}
	rows := tokens.AllRows
	if f.Kind == Mix {
		if !b.Has(tokens.ExpertMask) {
			return t, false, schema.BadInputf("expert_mask is required for MixEntropyLossFn")
		}
		rows = tokens.UsualRows
	}
	if err := b.Require(tokens.Entropy, tokens.ActionMask); err != nil {
		return t, false, fmt.Errorf("entropy loss %s: %w", f.Name, err)
	}
	return tokens.Term{Kernel: Kernel{}, Rows: rows, Mode: mode, Coef: f.Coef}, true, nil
}

// Summary turns the term's sums into the weighted term entropy_coef ·
// entropy and its metric entropy_loss.
func (f *Fn) Summary(mode agg.Mode, r tokens.TermResult) (float64, agg.Metrics) {
	e := agg.Total(mode, r.Stats.Rows, r.Sums[0])
	return e * f.Coef, agg.Metrics{"entropy_loss": e}
}
