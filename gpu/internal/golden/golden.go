// Package golden runs the device-evaluated golden cases of
// fixtures/conformance — every policy_loss case, kl's calculate_kl_loss
// cases and every entropy case — through a tokens.Evaluator, with the
// stages' own plans and finishing code (loss.EvalOn, kl/entropy LossOn).
// It backs the tests of package gpu (CUDA) and gpu/kernelcheck (the kernel
// header compiled as C). kl's calculate_kl and apply_kl_penalty_to_reward are
// host-side computations with no kernel and are not run here.
package golden

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/conformance"
	"github.com/rftpipe/rftpipe/stages/entropy"
	"github.com/rftpipe/rftpipe/stages/kl"
	"github.com/rftpipe/rftpipe/stages/loss"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// Report counts the cases of one golden file.
type Report struct {
	Kind                    string
	Passed, Failed, Skipped int
	Mismatches              []conformance.Mismatch
}

// Run runs policy_loss.json, kl.json and entropy.json of dir with ev. A
// non-nil tol replaces every case's own tolerance (float32 storage on a
// device is checked at 1e-5/1e-6, the float64 paths at their 1e-12).
func Run(dir string, ev tokens.Evaluator, tol *conformance.Tolerance) ([]Report, error) {
	var out []Report
	for _, kind := range []string{"policy_loss", "kl", "entropy"} {
		f, err := conformance.Load(filepath.Join(dir, kind+".json"))
		if err != nil {
			return nil, err
		}
		rep := Report{Kind: kind}
		for i := range f.Cases {
			c := &f.Cases[i]
			if kind == "kl" && method(c) != "calculate_kl_loss" {
				rep.Skipped++
				continue
			}
			chk := conformance.NewChecker(c)
			if tol != nil {
				chk.Tol = *tol
			}
			err := runCase(kind, c, ev, chk)
			wantErr, wantMsg := c.ExpectedError()
			switch {
			case wantErr && err == nil:
				chk.Failf("error", "no error", wantMsg)
			case wantErr:
				chk.Mismatches = nil
			case err != nil:
				chk.Failf("error", err.Error(), "no error")
			}
			if len(chk.Mismatches) > 0 {
				rep.Failed++
				rep.Mismatches = append(rep.Mismatches, chk.Mismatches...)
			} else {
				rep.Passed++
			}
		}
		out = append(out, rep)
	}
	return out, nil
}

func method(c *conformance.Case) string {
	var m string
	_ = json.Unmarshal(c.Call["method"], &m)
	return m
}

// expected is the part of a case's expectation these kinds share.
type expected struct {
	Loss    conformance.Float `json:"loss"`
	Metrics json.RawMessage   `json:"metrics"`
	GradLP  json.RawMessage   `json:"grad_logprob"`
	GradEnt json.RawMessage   `json:"grad_entropy"`
}

func runCase(kind string, c *conformance.Case, ev tokens.Evaluator, chk *conformance.Checker) error {
	user, err := args.FromJSON(c.Args)
	if err != nil {
		return err
	}
	b, err := tokens.FromCase(c)
	if err != nil {
		return err
	}
	grad := make([]float64, b.Rows.Tokens())
	var (
		value   float64
		metrics agg.Metrics
	)
	switch kind {
	case "policy_loss":
		l, err := loss.Default().New(c.Fn, user)
		if err != nil {
			return err
		}
		res, err := l.EvalOn(ev, b, grad)
		if err != nil {
			return err
		}
		value, metrics = res.Loss, res.Metrics
	default:
		var mode string
		if err := json.Unmarshal(c.Call["loss_agg_mode"], &mode); err != nil {
			return fmt.Errorf("call.loss_agg_mode: %w", err)
		}
		md, err := agg.ParseMode(mode)
		if err != nil {
			return err
		}
		if kind == "kl" {
			f, err := kl.New(c.Fn, user)
			if err != nil {
				return err
			}
			value, metrics, err = f.LossOn(ev, b, md, grad)
			if err != nil {
				return err
			}
		} else {
			f, err := entropy.New(c.Fn, user)
			if err != nil {
				return err
			}
			value, metrics, err = f.LossOn(ev, b, md, grad)
			if err != nil {
				return err
			}
		}
	}
	if wantErr, _ := c.ExpectedError(); wantErr {
		return nil
	}
	var want expected
	if err := json.Unmarshal(c.Expected, &want); err != nil {
		return err
	}
	chk.Scalar("loss", value, float64(want.Loss))
	wm, err := conformance.Metrics(want.Metrics)
	if err != nil {
		return err
	}
	chk.Metrics("metrics", metrics, wm)
	field, raw := "grad_logprob", want.GradLP
	if kind == "entropy" {
		field, raw = "grad_entropy", want.GradEnt
	}
	if string(raw) == "null" { // none: no gradient at all
		return nil
	}
	wg, err := conformance.Matrix(raw)
	if err != nil {
		return fmt.Errorf("expected %s: %w", field, err)
	}
	chk.Matrix(field, b.Split(grad), wg)
	return nil
}
