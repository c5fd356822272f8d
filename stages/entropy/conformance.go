package entropy

import (
	"encoding/json"

	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/conformance"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// ConformanceRunner returns the runner of golden kind "entropy": loss,
// metrics and gradient w.r.t. the entropy input.
func ConformanceRunner() conformance.Runner { return ConformanceRunnerOn(tokens.CPU) }

// ConformanceRunnerOn is ConformanceRunner with the entropy kernel
// evaluated by ev (e.g. package gpu's CUDA evaluator).
func ConformanceRunnerOn(ev tokens.Evaluator) conformance.Runner {
	return func(c *conformance.Case, chk *conformance.Checker) error {
		user, err := args.FromJSON(c.Args)
		if err != nil {
			return err
		}
		f, err := New(c.Fn, user)
		if err != nil {
			return err
		}
		var mode string
		if err := json.Unmarshal(c.Call["loss_agg_mode"], &mode); err != nil {
			return err
		}
		md, err := agg.ParseMode(mode)
		if err != nil {
			return err
		}
		b, err := tokens.FromCase(c)
		if err != nil {
			return err
		}
		grad := make([]float64, b.Rows.Tokens())
		loss, metrics, err := f.LossOn(ev, b, md, grad)
		if err != nil {
			return err
		}
		return chk.LossJSON(c.Expected, "grad_entropy", true, loss, metrics, b.Split(grad))
	}
}
