package kl

import (
	"fmt"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// LossOn is Loss with the kernel evaluated by ev: tokens.CPU (what Loss
// does) or a device backend such as package gpu.
func (f *Fn) LossOn(ev tokens.Evaluator, b *tokens.Batch, mode agg.Mode, grad []float64) (float64, agg.Metrics, error) {
	if f.Kind == None {
		if len(grad) != b.Rows.Tokens() {
			return 0, nil, schema.BadInputf("gradient buffer has %d tokens, the batch has %d", len(grad), b.Rows.Tokens())
		}
		clear(grad)
		return 0, agg.Metrics{}, nil
	}
	if err := b.Require(tokens.LogProb, tokens.RefLogProb, tokens.ActionMask); err != nil {
		return 0, nil, fmt.Errorf("KL loss %s: %w", f.Name, err)
	}
	c := f.Ctl.Coef()
	res, err := ev.Eval(b, grad, tokens.Term{Kernel: Kernel{Fn: f}, Rows: tokens.AllRows, Mode: mode, Coef: c})
	if err != nil {
		return 0, nil, fmt.Errorf("KL loss %s: %w", f.Name, err)
	}
	kl := agg.Total(mode, res[0].Stats.Rows, res[0].Sums[0])
	return kl * c, agg.Metrics{"kl_loss": kl, "kl_coef": c}, nil
}
