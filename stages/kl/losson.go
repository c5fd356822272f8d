package kl

import (
	"fmt"

	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// LossOn is Loss with the kernel evaluated by ev: tokens.CPU (what Loss
// does) or a device backend such as package gpu.
func (f *Fn) LossOn(ev tokens.Evaluator, b *tokens.Batch, mode agg.Mode, grad []float64) (float64, agg.Metrics, error) {
	return tokens.LossOn(ev, f, "KL loss "+f.Name, b, mode, grad)
}

// Term returns the KL loss as one term over b's rows (ok false for kl_loss_fn
// none), after checking b has its inputs.
func (f *Fn) Term(b *tokens.Batch, mode agg.Mode) (t tokens.Term, ok bool, err error) {
	if f.Kind == None {
		return t, false, nil
	}
	if err := b.Require(tokens.LogProb, tokens.RefLogProb, tokens.ActionMask); err != nil {
		return t, false, fmt.Errorf("KL loss %s: %w", f.Name, err)
	}
	return tokens.Term{Kernel: Kernel{Fn: f}, Rows: tokens.AllRows, Mode: mode, Coef: f.Ctl.Coef()}, true, nil
}

// Summary turns the term's sums into the weighted loss kl_coef · kl and its
// metrics kl_loss and kl_coef.
func (f *Fn) Summary(mode agg.Mode, r tokens.TermResult) (float64, agg.Metrics) {
	c := f.Ctl.Coef()
	kl := agg.Total(mode, r.Stats.Rows, r.Sums[0])
	return kl * c, agg.Metrics{"kl_loss": kl, "kl_coef": c}
}
