package loss

import (
	"encoding/json"

	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/conformance"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// ConformanceRunner returns the runner of golden kind "policy_loss" for the
// losses of reg, evaluated on the CPU: each case's complete constructor
// arguments configure the loss, and its loss, metrics and gradient with
// respect to logprob are compared.
func ConformanceRunner(reg *Registry) conformance.Runner { return ConformanceRunnerOn(reg, tokens.CPU) }

// ConformanceRunnerOn is ConformanceRunner with the kernels evaluated by ev
// (e.g. package gpu's CUDA evaluator).
func ConformanceRunnerOn(reg *Registry, ev tokens.Evaluator) conformance.Runner {
	return func(c *conformance.Case, chk *conformance.Checker) error {
		user, err := args.FromJSON(c.Args)
		if err != nil {
			return err
		}
		l, err := reg.New(c.Fn, user)
		if err != nil {
			return err
		}
		b, err := tokens.FromCase(c)
		if err != nil {
			return err
		}
		grad := make([]float64, b.Rows.Tokens())
		res, err := l.EvalOn(ev, b, grad)
		if err != nil {
			return err
		}
		if wantErr, _ := c.ExpectedError(); wantErr {
			return nil
		}
		var want struct {
			Loss    conformance.Float `json:"loss"`
			Metrics json.RawMessage   `json:"metrics"`
			Grad    json.RawMessage   `json:"grad_logprob"`
		}
		if err := json.Unmarshal(c.Expected, &want); err != nil {
			return err
		}
		chk.Scalar("loss", res.Loss, float64(want.Loss))
		wm, err := conformance.Metrics(want.Metrics)
		if err != nil {
			return err
		}
		chk.Metrics("metrics", res.Metrics, wm)
		wg, err := conformance.Matrix(want.Grad)
		if err != nil {
			return err
		}
		chk.Matrix("grad_logprob", b.Split(grad), wg)
		return nil
	}
}
