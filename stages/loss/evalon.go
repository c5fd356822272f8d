package loss

import (
	"fmt"

	"github.com/rftpipe/rftpipe/stages/tokens"
)

// EvalOn is Eval with the kernels evaluated by ev: tokens.CPU (what Eval
// does) or a device backend such as package gpu. Plan and Finish are the
// same on every backend; only the kernels' evaluation differs.
func (l *Loss) EvalOn(ev tokens.Evaluator, b *tokens.Batch, grad []float64) (Result, error) {
	p, err := l.Plan(b)
	if err != nil {
		return Result{}, err
	}
	res, err := ev.Eval(b, grad, p.Terms...)
	if err != nil {
		return Result{}, fmt.Errorf("policy loss %s: %w", l.Def.Name, err)
	}
	out, err := p.Finish(res)
	if err != nil {
		return Result{}, fmt.Errorf("policy loss %s: %w", l.Def.Name, err)
	}
	if out.GradTerms != nil {
		if _, err := ev.Eval(b, grad, out.GradTerms...); err != nil {
			return Result{}, fmt.Errorf("policy loss %s: %w", l.Def.Name, err)
		}
	}
	return Result{Loss: out.Loss, Metrics: out.Metrics}, nil
}
