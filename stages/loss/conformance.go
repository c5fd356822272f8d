package loss

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/rftpipe/rftpipe/stages/agg"

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
// (e.g. package gpu's CUDA evaluator); a loss without a device form
// (Def.CPUOnly: m2po) is evaluated on the CPU.
func ConformanceRunnerOn(reg *Registry, ev tokens.Evaluator) conformance.Runner {
	return func(c *conformance.Case, chk *conformance.Checker) error {
		user, err := args.FromJSON(c.Args)
		if err != nil {
			return err
		}
		ev := ev
		if s, err := reg.Get(c.Fn); err == nil && s.New.CPUOnly {
			ev = tokens.CPU // no device form: the CPU's value is the loss's
		}
		if c.Fn == "m2po" {
			return runM2PO(reg, ev, user, c, chk)
		}
		l, err := New(reg, c.Fn, user)
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
		return chk.LossJSON(c.Expected, "grad_logprob", false, res.Loss, res.Metrics, b.Split(grad))
	}
}

// runM2PO runs an m2po case: the mask over the whole case batch (one
// mini-batch), then the loss over the batch or, with call.micro_batch_rows,
// once per consecutive slice of rows with that one mask; call.batch_num_tokens
// and call.dp_size are the engine's global aggregation arguments.
func runM2PO(reg *Registry, ev tokens.Evaluator, user args.Values, c *conformance.Case, chk *conformance.Checker) error {
	var call struct {
		BatchNumTokens *float64 `json:"batch_num_tokens"`
		DPSize         *int64   `json:"dp_size"`
		MicroRows      []int    `json:"micro_batch_rows"`
	}
	if err := c.DecodeCall(&call); err != nil {
		return fmt.Errorf("%s: call: %w", c.Name, err)
	}
	if call.BatchNumTokens != nil {
		user["batch_num_tokens"] = *call.BatchNumTokens
	}
	if call.DPSize != nil {
		user["dp_size"] = *call.DPSize
	}
	l, err := New(reg, c.Fn, user)
	if err != nil {
		return err
	}
	p := l.p.(m2poPlanner)
	b, err := tokens.FromCase(c)
	if err != nil {
		return err
	}
	keep, st, err := M2POMask(b, p.threshold)
	if err != nil {
		return err
	}
	var want struct {
		Mask         [][]float64                  `json:"m2po_mask"`
		MaskMetrics  map[string]conformance.Float `json:"mask_metrics"`
		MicroLosses  []conformance.Float          `json:"micro_losses"`
		MicroMetrics []json.RawMessage            `json:"micro_metrics"`
		Loss         conformance.Float            `json:"loss"`
		Metrics      json.RawMessage              `json:"metrics"`
		Grad         json.RawMessage              `json:"grad_logprob"`
	}
	if err := json.Unmarshal(c.Expected, &want); err != nil {
		return err
	}
	gotMask := make([]float64, len(keep))
	for t, k := range keep {
		gotMask[t] = b2f(k)
	}
	exact := &conformance.Checker{Case: c}
	exact.Matrix("m2po_mask", b.Split(gotMask), want.Mask)
	chk.Mismatches = append(chk.Mismatches, exact.Mismatches...)
	maskChk := &conformance.Checker{Case: c, Tol: chk.Tol}
	if c.ToleranceMaskMetrics != nil {
		maskChk.Tol = *c.ToleranceMaskMetrics
	}
	gotStats := agg.Metrics{}
	for k, v := range st.Metrics() {
		gotStats[strings.TrimPrefix(k, "m2po/")] = v
	}
	wantStats := map[string]float64{}
	for k, v := range want.MaskMetrics {
		wantStats[k] = float64(v)
	}
	maskChk.Metrics("mask_metrics", gotStats, wantStats)
	chk.Mismatches = append(chk.Mismatches, maskChk.Mismatches...)

	rows := call.MicroRows
	if rows == nil {
		rows = []int{b.Rows.N()}
	}
	grad := make([]float64, b.Rows.Tokens())
	total, lo := 0.0, 0
	for i, n := range rows {
		hi := lo + n
		sb := b.Slice(lo, hi)
		t0, t1 := b.Rows.Off[lo], b.Rows.Off[hi]
		plan := p.planMask(sb, keep[t0:t1], st)
		res, err := ev.Eval(sb, grad[t0:t1], plan.Terms...)
		if err != nil {
			return err
		}
		out, err := plan.Finish(res)
		if err != nil {
			return err
		}
		for k := range st.Metrics() {
			delete(out.Metrics, k)
		}
		total += out.Loss
		wantMetrics := want.Metrics
		if call.MicroRows != nil {
			chk.Scalar(fmt.Sprintf("micro_losses[%d]", i), out.Loss, float64(want.MicroLosses[i]))
			wantMetrics = want.MicroMetrics[i]
		}
		if err := chk.MetricsJSON(fmt.Sprintf("metrics[%d]", i), out.Metrics, wantMetrics); err != nil {
			return err
		}
		lo = hi
	}
	chk.Scalar("loss", total, float64(want.Loss))
	return chk.MatrixJSON("grad_logprob", b.Split(grad), want.Grad)
}
