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
	if f.Kind == None {
		if len(grad) != b.Rows.Tokens() {
			return 0, nil, schema.BadInputf("gradient buffer has %d tokens, the batch has %d", len(grad), b.Rows.Tokens())
		}
		clear(grad)
		return 0, agg.Metrics{}, nil
	}
	rows := tokens.AllRows
	if f.Kind == Mix {
		if !b.Has(tokens.ExpertMask) {
			return 0, nil, schema.BadInputf("expert_mask is required for MixEntropyLossFn")
		}
		rows = tokens.UsualRows
	}
	if err := b.Require(tokens.Entropy, tokens.ActionMask); err != nil {
		return 0, nil, fmt.Errorf("entropy loss %s: %w", f.Name, err)
	}
	res, err := ev.Eval(b, grad, tokens.Term{Kernel: Kernel{}, Rows: rows, Mode: mode, Coef: f.Coef})
	if err != nil {
		return 0, nil, fmt.Errorf("entropy loss %s: %w", f.Name, err)
	}
	e := agg.Total(mode, res[0].Stats.Rows, res[0].Sums[0])
	return e * f.Coef, agg.Metrics{"entropy_loss": e}, nil
}
