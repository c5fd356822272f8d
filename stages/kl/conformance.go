package kl

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/conformance"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// ErrDivergence marks a golden case where upstream raised and rftpipe
// deliberately does not, because the spec says not to reproduce that crash
// (the adaptive controller, quirk Q-08). The runner checks rftpipe's result
// against the intended formula instead and reports the divergence as the
// case's error, so the case counts as passed only if that check holds.
var ErrDivergence = errors.New("deliberate divergence from upstream")

// ConformanceRunner returns the runner of golden kind "kl": call.method
// calculate_kl (per-token values), calculate_kl_loss (loss, metrics,
// gradient w.r.t. logprob) or apply_kl_penalty_to_reward (rewards, metrics,
// coefficient after the controller's update).
func ConformanceRunner() conformance.Runner { return ConformanceRunnerOn(tokens.CPU) }

// ConformanceRunnerOn is ConformanceRunner with the KL loss kernel evaluated
// by ev (e.g. package gpu's CUDA evaluator).
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
		var call struct {
			Method  string `json:"method"`
			Mode    string `json:"loss_agg_mode"`
			PassOld bool   `json:"pass_old_logprob"`
		}
		if err := c.DecodeCall(&call); err != nil {
			return err
		}
		b, err := tokens.FromCase(c)
		if err != nil {
			return err
		}
		var want struct {
			KL      json.RawMessage   `json:"kl"`
			Metrics json.RawMessage   `json:"metrics"`
			Rewards json.RawMessage   `json:"token_level_rewards"`
			After   conformance.Float `json:"kl_coef_after"`
		}
		wantErr, wantMsg := c.ExpectedError()
		if !wantErr {
			if err := json.Unmarshal(c.Expected, &want); err != nil {
				return err
			}
		}
		switch call.Method {
		case "calculate_kl":
			var old []float64
			if call.PassOld {
				old = b.Col(tokens.OldLogProb)
			}
			kl := make([]float64, b.Rows.Tokens())
			f.Values(kl, b.Col(tokens.LogProb), b.Col(tokens.RefLogProb), old)
			return chk.MatrixJSON("kl", b.Split(kl), want.KL)
		case "calculate_kl_loss":
			md, err := agg.ParseMode(call.Mode)
			if err != nil {
				return err
			}
			grad := make([]float64, b.Rows.Tokens())
			loss, metrics, err := f.LossOn(ev, b, md, grad)
			if err != nil {
				return err
			}
			return chk.LossJSON(c.Expected, "grad_logprob", true, loss, metrics, b.Split(grad))
		case "apply_kl_penalty_to_reward":
			m, err := conformance.Matrix(c.Inputs["token_level_scores"])
			if err != nil {
				return err
			}
			scores, err := b.Flatten("token_level_scores", m)
			if err != nil {
				return err
			}
			before := f.Ctl.Coef()
			rewards, metrics, err := f.ApplyPenalty(b, scores)
			if err != nil {
				return err
			}
			if a, ok := f.Ctl.(*Adaptive); ok && wantErr {
				return checkAdaptive(chk, a, before, metrics, b.Rows.N(), wantMsg)
			}
			if err := chk.MatrixJSON("token_level_rewards", b.Split(rewards), want.Rewards); err != nil {
				return err
			}
			if err := chk.MetricsJSON("metrics", metrics, want.Metrics); err != nil {
				return err
			}
			chk.Scalar("kl_coef_after", f.Ctl.Coef(), float64(want.After))
			return nil
		}
		return fmt.Errorf("unknown call.method %q", call.Method)
	}
}

// checkAdaptive handles upstream's adaptive-controller crash: the
// updated coefficient must follow the intended formula, recomputed here from
// the reported kl; then the divergence is returned as the case's error.
func checkAdaptive(chk *conformance.Checker, a *Adaptive, before float64, m agg.Metrics, rows int, upstream string) error {
	e := m["kl"]/a.Target - 1
	e = max(-0.2, min(0.2, e))
	want := before * (1 + e*float64(rows)/a.Horizon)
	chk.Scalar("kl_coef_after (Q-08 intended formula)", a.C, want)
	chk.Scalar("metrics.kl_coef", m["kl_coef"], before)
	if len(chk.Mismatches) > 0 {
		return nil // a real failure: the mismatches are reported
	}
	return fmt.Errorf("%w (Q-08): upstream raised %q; rftpipe's adaptive controller updated kl_coef %v → %v", ErrDivergence, upstream, before, a.C)
}
