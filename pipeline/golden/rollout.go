package golden

import (
	"encoding/json"
	"fmt"

	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/conformance"
	"github.com/rftpipe/rftpipe/stages/loss"
	"github.com/rftpipe/rftpipe/stages/rollout"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// rolloutRunner returns the runner of golden kind "rollout_correction"
// (verl): package rollout's call forms (the assembled correction call, the
// off-policy metrics, agg_loss and its micro-batch composition) and, here
// as they need a policy loss, verl's policy losses with IS weights and
// global denominators (as the losses of reg with verl's arguments, see
// verlLoss), their micro-batch sums, and the decoupled correction + loss.
func rolloutRunner(reg *loss.Registry) conformance.Runner {
	with := func(run func(*loss.Registry, *conformance.Case, *conformance.Checker, map[string]json.RawMessage) error) rollout.ConformanceMethod {
		return func(c *conformance.Case, chk *conformance.Checker, want map[string]json.RawMessage) error {
			return run(reg, c, chk, want)
		}
	}
	return rollout.ConformanceRunner(map[string]rollout.ConformanceMethod{
		"policy_loss":              with(runPolicyLoss),
		"policy_loss_microbatches": with(runPolicyMicro),
		"decoupled":                with(runDecoupled),
	})
}

// verlLoss maps a verl policy-loss call — its registry name (vanilla,
// gspo, sapo, cispo, gpg, geo_mean, bypass_mode, dppo_tv, dppo_kl,
// clip_cov, kl_cov, dro, or reinforce for compute_policy_loss_reinforce)
// and actor config fields (clip_ratio, clip_ratio_low, clip_ratio_high,
// clip_ratio_c, tau_pos, tau_neg, loss_agg_mode, global_batch_info, the
// policy_loss fields clip_cov_ratio, clip_cov_lb, clip_cov_ub, kl_cov_ratio,
// ppo_kl_coef, dro_beta, and rollout_correction for bypass_mode)
// — to rftpipe's loss name and arguments. An empty global_batch_info still
// selects verl's aggregation (dp_size 1).
func verlLoss(fn string, actor args.Values) (string, args.Values, error) {
	clip := func(k string) any {
		if x, ok := actor[k]; ok && x != nil {
			return x
		}
		return actor["clip_ratio"]
	}
	out := args.Values{}
	withAgg := func() {
		out["loss_agg_mode"] = actor["loss_agg_mode"]
		out["dp_size"] = int64(1)
		if g, ok := actor["global_batch_info"].(map[string]any); ok {
			for k, v := range g {
				if v != nil {
					if n, isNum := v.(json.Number); isNum {
						f, _ := n.Float64()
						v = f
					}
					out[k] = v
				}
			}
		}
	}
	name := fn
	switch fn {
	case "vanilla", "bypass_mode":
		name = "ppo"
		out["clip_range"], out["clip_range_low"], out["clip_range_high"] = actor["clip_ratio"], clip("clip_ratio_low"), clip("clip_ratio_high")
		out["clip_ratio_c"] = actor["clip_ratio_c"]
		withAgg()
		if fn == "bypass_mode" {
			name = fn
			rc, ok := actor["rollout_correction"].(map[string]any)
			if !ok {
				return "", nil, fmt.Errorf("bypass_mode: rollout_correction config missing")
			}
			for k, v := range rc {
				switch k {
				case "bypass_mode":
				case "rollout_is_threshold", "rollout_rs_threshold":
					if f, ok := v.(json.Number); ok {
						v = f.String() // the loss argument is the threshold spec string
					}
					out[k] = v
				default:
					out[k] = v
				}
			}
		}
	case "gspo", "cispo":
		out["clip_range_low"], out["clip_range_high"], out["verl"] = clip("clip_ratio_low"), clip("clip_ratio_high"), true
		withAgg()
	case "sapo":
		out["tau_pos"], out["tau_neg"], out["verl"] = actor["tau_pos"], actor["tau_neg"], true
		withAgg()
	case "gpg", "reinforce":
		withAgg()
	case "geo_mean":
		out["clip_range"], out["clip_range_low"], out["clip_range_high"] = actor["clip_ratio"], clip("clip_ratio_low"), clip("clip_ratio_high")
	case "dppo_tv", "dppo_kl", "clip_cov":
		out["clip_range"], out["clip_range_low"], out["clip_range_high"] = actor["clip_ratio"], clip("clip_ratio_low"), clip("clip_ratio_high")
		keys := []string{"clip_ratio_c"}
		if fn == "clip_cov" {
			keys = []string{"clip_cov_ratio", "clip_cov_lb", "clip_cov_ub"}
		}
		for _, k := range keys {
			out[k] = actor[k]
		}
		withAgg()
	case "kl_cov":
		out["kl_cov_ratio"], out["ppo_kl_coef"] = actor["kl_cov_ratio"], actor["ppo_kl_coef"]
		withAgg()
	case "dro":
		out["dro_beta"] = actor["dro_beta"]
		withAgg()
	default:
		return "", nil, fmt.Errorf("no rftpipe loss for verl policy loss %q", fn)
	}
	return name, out, nil
}

// lossCase is a policy-loss call's inputs: the batch columns by canonical
// name, laid out by rows.
type lossCase struct {
	rows agg.Rows
	cols map[string][]float64
}

// lossInputs reads a policy-loss case's inputs; reinforce's rollout_logprob
// is the loss's old_logprob.
func lossInputs(c *conformance.Case) (lossCase, error) {
	lc := lossCase{cols: map[string][]float64{}}
	for name, raw := range c.Inputs {
		canon := name
		switch name {
		case rollout.ConformanceRolloutLogprob:
			if c.Fn != "reinforce" {
				continue // the decoupled form's correction input
			}
			canon = tokens.OldLogProb
		case tokens.OldLogProb:
			if c.Fn == "reinforce" {
				continue
			}
		}
		m, err := conformance.Matrix(raw)
		if err != nil {
			return lc, fmt.Errorf("input %s: %w", name, err)
		}
		b, err := tokens.FromMatrix(canon, m)
		if err != nil {
			return lc, fmt.Errorf("input %s: %w", name, err)
		}
		lc.rows, lc.cols[canon] = b.Rows, b.Col(canon)
	}
	return lc, nil
}

// batch returns rows lo..hi of the case as a token batch.
func (lc lossCase) batch(lo, hi int) (*tokens.Batch, error) {
	lens := make([]int, hi-lo)
	for i := range lens {
		a, b := lc.rows.Span(lo + i)
		lens[i] = b - a
	}
	rows := agg.NewRows(lens)
	rows.Width = lc.rows.Width
	b := tokens.New(rows)
	t0, _ := lc.rows.Span(lo)
	for name, v := range lc.cols {
		if err := b.Set(name, v[t0:t0+rows.Tokens()]); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// evalLoss evaluates the case's verl loss on b, its call number call (the
// micro-batch's; -1: the case's one call): clip_cov chooses its clipped
// tokens by the permutation the reference drew (call.randperm).
func evalLoss(reg *loss.Registry, c *conformance.Case, b *tokens.Batch, call int) (float64, agg.Metrics, []float64, error) {
	v, err := args.FromJSON(c.Args)
	if err != nil {
		return 0, nil, nil, err
	}
	name, a, err := verlLoss(c.Fn, v)
	if err != nil {
		return 0, nil, nil, err
	}
	l, err := loss.New(reg, name, a)
	if err != nil {
		return 0, nil, nil, err
	}
	if name == "clip_cov" {
		perm, err := recordedPerm(c, call)
		if err != nil {
			return 0, nil, nil, err
		}
		if l, err = l.WithPermutation(perm); err != nil {
			return 0, nil, nil, err
		}
	}
	grad := make([]float64, b.Rows.Tokens())
	res, err := l.Eval(b, grad)
	return res.Loss, res.Metrics, grad, err
}

// recordedPerm returns the permutation torch.randperm returned in call
// number call of a case (-1: its one call), nil where it was not called.
func recordedPerm(c *conformance.Case, call int) ([]int, error) {
	raw := c.Call["randperm"]
	if call < 0 {
		var perm []int
		if err := json.Unmarshal(raw, &perm); err != nil {
			return nil, fmt.Errorf("call.randperm: %w", err)
		}
		return perm, nil
	}
	var perms [][]int
	if err := json.Unmarshal(raw, &perms); err != nil {
		return nil, fmt.Errorf("call.randperm: %w", err)
	}
	if call >= len(perms) {
		return nil, fmt.Errorf("call.randperm: %d permutations, no micro-batch %d", len(perms), call)
	}
	return perms[call], nil
}

// checkLossMetrics compares a loss's metrics with verl's: verl's
// "actor/<name>" is rftpipe's "<name>"; rftpipe's pg_loss is the loss itself,
// which verl returns separately.
func checkLossMetrics(chk *conformance.Checker, field string, got agg.Metrics, raw json.RawMessage) error {
	want, err := conformance.Metrics(raw)
	if err != nil {
		return err
	}
	mapped := agg.Metrics{}
	for k, v := range got {
		switch _, actor := want["actor/"+k]; {
		case actor:
			mapped["actor/"+k] = v
		case k == "pg_loss":
		default:
			mapped[k] = v
		}
	}
	chk.Metrics(field, mapped, want)
	return nil
}

// checkLoss compares loss, metrics and grad_logprob.
func checkLoss(chk *conformance.Checker, want map[string]json.RawMessage, rows agg.Rows, l float64, m agg.Metrics, grad []float64) error {
	var wl conformance.Float
	if err := json.Unmarshal(want["loss"], &wl); err != nil {
		return err
	}
	chk.Scalar("loss", l, float64(wl))
	if err := checkLossMetrics(chk, "metrics", m, want["metrics"]); err != nil {
		return err
	}
	return chk.MatrixJSON("grad_logprob", tokens.New(rows).Split(grad), want["grad_logprob"])
}

func runPolicyLoss(reg *loss.Registry, c *conformance.Case, chk *conformance.Checker, want map[string]json.RawMessage) error {
	lc, err := lossInputs(c)
	if err != nil {
		return err
	}
	b, err := lc.batch(0, lc.rows.N())
	if err != nil {
		return err
	}
	l, m, grad, err := evalLoss(reg, c, b, -1)
	if err != nil || chk == nil {
		return err
	}
	return checkLoss(chk, want, lc.rows, l, m, grad)
}

func runPolicyMicro(reg *loss.Registry, c *conformance.Case, chk *conformance.Checker, want map[string]json.RawMessage) error {
	var parts []int
	if err := json.Unmarshal(c.Call["micro_batch_rows"], &parts); err != nil {
		return fmt.Errorf("call.micro_batch_rows: %w", err)
	}
	lc, err := lossInputs(c)
	if err != nil {
		return err
	}
	var losses []float64
	var metrics []agg.Metrics
	var grad []float64
	sum, lo := 0.0, 0
	for i, n := range parts {
		if lo+n > lc.rows.N() {
			return fmt.Errorf("call.micro_batch_rows %v: more rows than the batch's %d", parts, lc.rows.N())
		}
		b, err := lc.batch(lo, lo+n)
		if err != nil {
			return err
		}
		l, m, g, err := evalLoss(reg, c, b, i)
		if err != nil {
			return err
		}
		losses, metrics, grad = append(losses, l), append(metrics, m), append(grad, g...)
		sum += l
		lo += n
	}
	if chk == nil {
		return nil
	}
	var w struct {
		Micro json.RawMessage   `json:"micro_losses"`
		Sum   conformance.Float `json:"loss_sum"`
		Met   []json.RawMessage `json:"micro_metrics"`
	}
	raw, _ := json.Marshal(want)
	if err := json.Unmarshal(raw, &w); err != nil {
		return err
	}
	micro, err := conformance.Floats(w.Micro)
	if err != nil {
		return err
	}
	chk.Vector("micro_losses", losses, micro)
	chk.Scalar("loss_sum", sum, float64(w.Sum))
	if len(w.Met) != len(metrics) {
		chk.Failf("micro_metrics", fmt.Sprint(len(metrics)), fmt.Sprint(len(w.Met)))
		return nil
	}
	for i := range metrics {
		if err := checkLossMetrics(chk, fmt.Sprintf("micro_metrics[%d]", i), metrics[i], w.Met[i]); err != nil {
			return err
		}
	}
	return chk.MatrixJSON("grad_logprob", tokens.New(lc.rows).Split(grad), want["grad_logprob"])
}

func runDecoupled(reg *loss.Registry, c *conformance.Case, chk *conformance.Checker, want map[string]json.RawMessage) error {
	var rc map[string]json.RawMessage
	if err := json.Unmarshal(c.Args["rollout_correction"], &rc); err != nil {
		return fmt.Errorf("args.rollout_correction: %w", err)
	}
	rows, w, mask, err := rollout.ConformanceCorrect(c, rc, chk, want, "rollout_corr_metrics")
	if err != nil {
		return err
	}
	lc, err := lossInputs(c)
	if err != nil {
		return err
	}
	lc.cols[tokens.ActionMask] = mask
	if w != nil {
		lc.cols[tokens.RolloutISWeights] = w
	}
	b, err := lc.batch(0, rows.N())
	if err != nil {
		return err
	}
	l, m, grad, err := evalLoss(reg, c, b, -1)
	if err != nil || chk == nil {
		return err
	}
	return checkLoss(chk, want, rows, l, m, grad)
}
