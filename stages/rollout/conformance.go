package rollout

import (
	"encoding/json"
	"fmt"

	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/conformance"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// Losses evaluates policy losses by name: package loss's Registry (an
// interface, as package loss's bypass_mode uses this package).
type Losses interface {
	Eval(name string, user args.Values, b *tokens.Batch, grad []float64) (float64, agg.Metrics, error)
}

// ConformanceRunner returns the runner of golden kind "rollout_correction"
// (verl): the assembled correction call, the off-policy metrics, agg_loss
// and its micro-batch composition, verl's policy losses with IS weights and
// global denominators (as the losses of reg with verl's arguments, see
// VerlLoss), their micro-batch sums, and the decoupled correction + loss.
func ConformanceRunner(reg Losses) conformance.Runner {
	return func(c *conformance.Case, chk *conformance.Checker) error {
		var method string
		if err := json.Unmarshal(c.Call["method"], &method); err != nil {
			return fmt.Errorf("case %s: call.method: %w", c.Name, err)
		}
		run, ok := methods[method]
		if !ok {
			return fmt.Errorf("case %s: unknown call.method %q", c.Name, method)
		}
		if wantErr, _ := c.ExpectedError(); wantErr {
			return run(reg, c, nil, nil)
		}
		var want map[string]json.RawMessage
		if err := json.Unmarshal(c.Expected, &want); err != nil {
			return err
		}
		return run(reg, c, chk, want)
	}
}

// methodRunner runs one call form; chk and want are nil for error cases.
type methodRunner func(reg Losses, c *conformance.Case, chk *conformance.Checker, want map[string]json.RawMessage) error

var methods = map[string]methodRunner{
	"rollout_correction":       runCorrection,
	"offpolicy_metrics":        runOffPolicy,
	"agg_loss":                 runAggLoss,
	"agg_loss_microbatches":    runAggMicro,
	"policy_loss":              runPolicyLoss,
	"policy_loss_microbatches": runPolicyMicro,
	"decoupled":                runDecoupled,
}

// matrix decodes a [B,T] input as a flat slice with its row layout.
func matrix(raw json.RawMessage) (agg.Rows, []float64, error) {
	m, err := conformance.Matrix(raw)
	if err != nil {
		return agg.Rows{}, nil, err
	}
	lens := make([]int, len(m))
	var flat []float64
	for i, r := range m {
		lens[i] = len(r)
		flat = append(flat, r...)
	}
	return agg.NewRows(lens), flat, nil
}

// inputs decodes the named [B,T] inputs of a case, which share one layout.
func inputs(c *conformance.Case, names ...string) (agg.Rows, [][]float64, error) {
	var rows agg.Rows
	out := make([][]float64, len(names))
	for i, n := range names {
		r, v, err := matrix(c.Inputs[n])
		if err != nil {
			return rows, nil, fmt.Errorf("input %s: %w", n, err)
		}
		if i > 0 && r.Tokens() != rows.Tokens() {
			return rows, nil, fmt.Errorf("input %s: %d tokens, %s has %d", n, r.Tokens(), names[0], rows.Tokens())
		}
		rows, out[i] = r, v
	}
	return rows, out, nil
}

// split returns a flat slice as ragged rows.
func split(r agg.Rows, v []float64) [][]float64 {
	out := make([][]float64, r.N())
	for b := range out {
		lo, hi := r.Span(b)
		out[b] = v[lo:hi]
	}
	return out
}

// configOf parses a case's rollout_correction arguments.
func configOf(raw map[string]json.RawMessage) (*Corrector, error) {
	v, err := args.FromJSON(raw)
	if err != nil {
		return nil, err
	}
	cfg, err := Parse(v)
	if err != nil {
		return nil, err
	}
	return New(cfg)
}

// correct runs the assembled call on old/rollout/mask inputs and checks
// weights, mask and metrics under the given expected keys.
func correct(c *conformance.Case, rc map[string]json.RawMessage, chk *conformance.Checker, want map[string]json.RawMessage, metricsKey string) (agg.Rows, []float64, []float64, error) {
	rows, in, err := inputs(c, "old_logprob", "rollout_logprob", "action_mask")
	if err != nil {
		return rows, nil, nil, err
	}
	corr, err := configOf(rc)
	if err != nil {
		return rows, nil, nil, err
	}
	w, m, met, err := corr.Correct(Input{Rows: rows, Old: in[0], Rollout: in[1], Mask: in[2]})
	if err != nil || chk == nil {
		return rows, w, m, err
	}
	if string(want["rollout_is_weights"]) == "null" {
		if w != nil {
			chk.Failf("rollout_is_weights", "weights", "null")
		}
	} else {
		ww, err := conformance.Matrix(want["rollout_is_weights"])
		if err != nil {
			return rows, nil, nil, err
		}
		if w == nil {
			chk.Failf("rollout_is_weights", "null", "weights")
		} else {
			chk.Matrix("rollout_is_weights", split(rows, w), ww)
		}
	}
	wm, err := conformance.Matrix(want["action_mask"])
	if err != nil {
		return rows, nil, nil, err
	}
	chk.Matrix("action_mask", split(rows, m), wm)
	wmet, err := conformance.Metrics(want[metricsKey])
	if err != nil {
		return rows, nil, nil, err
	}
	chk.Metrics(metricsKey, met, wmet)
	return rows, w, m, nil
}

func runCorrection(_ Losses, c *conformance.Case, chk *conformance.Checker, want map[string]json.RawMessage) error {
	_, _, _, err := correct(c, c.Args, chk, want, "metrics")
	return err
}

func runOffPolicy(_ Losses, c *conformance.Case, chk *conformance.Checker, want map[string]json.RawMessage) error {
	var pass bool
	if err := json.Unmarshal(c.Call["pass_rollout_logprob"], &pass); err != nil {
		return fmt.Errorf("call.pass_rollout_logprob: %w", err)
	}
	names := []string{"old_logprob", "action_mask"}
	if pass {
		names = append(names, "rollout_logprob")
	}
	rows, in, err := inputs(c, names...)
	if err != nil {
		return err
	}
	var ro []float64
	if pass {
		ro = in[2]
	}
	got, err := OffPolicyMetrics(rows, in[0], ro, in[1])
	if err != nil || chk == nil {
		return err
	}
	wm, err := conformance.Metrics(want["metrics"])
	if err != nil {
		return err
	}
	chk.Metrics("metrics", got, wm)
	return nil
}

// globalOf reads agg_loss's global arguments from a case's args (null or
// absent: local).
func globalOf(raw map[string]json.RawMessage) (agg.Mode, agg.Global, error) {
	v, err := args.FromJSON(raw)
	if err != nil {
		return 0, agg.Global{}, err
	}
	md, err := agg.ParseMode(v.String("loss_agg_mode"))
	if err != nil {
		return 0, agg.Global{}, err
	}
	f := func(k string) float64 {
		switch x := v[k].(type) {
		case int64:
			return float64(x)
		case float64:
			return x
		}
		return 0
	}
	g := agg.Global{DPSize: int(f("dp_size")), BatchNumTokens: f("batch_num_tokens"),
		GlobalBatchSize: f("global_batch_size"), LossScaleFactor: f("loss_scale_factor")}
	return md, g, g.Validate()
}

func runAggLoss(_ Losses, c *conformance.Case, chk *conformance.Checker, want map[string]json.RawMessage) error {
	md, g, err := globalOf(c.Args)
	if err != nil {
		return err
	}
	rows, in, err := inputs(c, "loss_mat", "action_mask")
	if err != nil {
		return err
	}
	grad := make([]float64, rows.Tokens())
	v := g.Loss(rows, in[0], in[1], md, grad)
	if chk == nil {
		return nil
	}
	var wl conformance.Float
	if err := json.Unmarshal(want["loss"], &wl); err != nil {
		return err
	}
	chk.Scalar("loss", v, float64(wl))
	wg, err := conformance.Matrix(want["grad_loss_mat"])
	if err != nil {
		return err
	}
	chk.Matrix("grad_loss_mat", split(rows, grad), wg)
	return nil
}

func runAggMicro(_ Losses, c *conformance.Case, chk *conformance.Checker, want map[string]json.RawMessage) error {
	var mbsRaw []struct {
		Rank int             `json:"rank"`
		Loss json.RawMessage `json:"loss_mat"`
		Mask json.RawMessage `json:"action_mask"`
	}
	if err := json.Unmarshal(c.Inputs["micro_batches"], &mbsRaw); err != nil {
		return fmt.Errorf("input micro_batches: %w", err)
	}
	mbs := make([]agg.MicroBatch, len(mbsRaw))
	for i, r := range mbsRaw {
		rows, l, err := matrix(r.Loss)
		if err != nil {
			return err
		}
		_, m, err := matrix(r.Mask)
		if err != nil {
			return err
		}
		mbs[i] = agg.MicroBatch{Rank: r.Rank, Rows: rows, Loss: l, Mask: m}
	}
	v, err := args.FromJSON(c.Args)
	if err != nil {
		return err
	}
	md, g, err := globalOf(c.Args)
	if err != nil {
		return err
	}
	var comp agg.Composition
	switch v.String("path") {
	case "engine":
		comp, err = agg.ComposeEngine(mbs, md, g)
	case "legacy":
		comp, err = agg.ComposeLegacy(mbs, md, agg.Legacy{DPSize: g.DPSize, MiniBatchSize: int(v.Int("ppo_mini_batch_size")),
			MicroBatchSizePerGPU: int(v.Int("ppo_micro_batch_size_per_gpu")), DynamicBatchSize: v.Bool("use_dynamic_bsz")})
	default:
		return fmt.Errorf("unknown path %q", v.String("path"))
	}
	if err != nil || chk == nil {
		return err
	}
	var w struct {
		Micro []conformance.Float `json:"micro_losses"`
		Ranks []conformance.Float `json:"rank_sums"`
		Obj   conformance.Float   `json:"objective"`
	}
	raw, _ := json.Marshal(want)
	if err := json.Unmarshal(raw, &w); err != nil {
		return err
	}
	chk.Vector("micro_losses", comp.MicroLosses, floats(w.Micro))
	chk.Vector("rank_sums", comp.RankSums, floats(w.Ranks))
	chk.Scalar("objective", comp.Objective, float64(w.Obj))
	var wg []json.RawMessage
	if err := json.Unmarshal(want["grad_loss_mat"], &wg); err != nil {
		return err
	}
	if len(wg) != len(mbs) {
		chk.Failf("grad_loss_mat", fmt.Sprint(len(mbs)), fmt.Sprint(len(wg)))
		return nil
	}
	for i := range mbs {
		m, err := conformance.Matrix(wg[i])
		if err != nil {
			return err
		}
		chk.Matrix(fmt.Sprintf("grad_loss_mat[%d]", i), split(mbs[i].Rows, comp.Grad[i]), m)
	}
	return nil
}

func floats(fs []conformance.Float) []float64 {
	out := make([]float64, len(fs))
	for i, f := range fs {
		out[i] = float64(f)
	}
	return out
}

// VerlLoss maps a verl policy-loss call — its registry name (vanilla,
// gspo, sapo, cispo, gpg, geo_mean, bypass_mode, or reinforce for
// compute_policy_loss_reinforce) and actor config fields (clip_ratio,
// clip_ratio_low, clip_ratio_high, clip_ratio_c, tau_pos, tau_neg,
// loss_agg_mode, global_batch_info, and rollout_correction for bypass_mode)
// — to rftpipe's loss name and arguments. An empty global_batch_info still
// selects verl's aggregation (dp_size 1).
func VerlLoss(fn string, actor args.Values) (string, args.Values, error) {
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
				case "rollout_rs_threshold":
					if f, ok := v.(json.Number); ok {
						v = f.String() // the loss argument is the threshold spec string
					}
					out[k] = v
				case "rollout_is_threshold":
					if f, ok := v.(json.Number); ok {
						v, _ = f.Float64()
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
		case "rollout_logprob":
			if c.Fn != "reinforce" {
				continue // the decoupled form's correction input
			}
			canon = tokens.OldLogProb
		case "old_logprob":
			if c.Fn == "reinforce" {
				continue
			}
		}
		r, v, err := matrix(raw)
		if err != nil {
			return lc, fmt.Errorf("input %s: %w", name, err)
		}
		lc.rows, lc.cols[canon] = r, v
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

// evalLoss evaluates the case's verl loss on b.
func evalLoss(reg Losses, c *conformance.Case, b *tokens.Batch) (float64, agg.Metrics, []float64, error) {
	v, err := args.FromJSON(c.Args)
	if err != nil {
		return 0, nil, nil, err
	}
	name, a, err := VerlLoss(c.Fn, v)
	if err != nil {
		return 0, nil, nil, err
	}
	grad := make([]float64, b.Rows.Tokens())
	l, m, err := reg.Eval(name, a, b, grad)
	return l, m, grad, err
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
	wg, err := conformance.Matrix(want["grad_logprob"])
	if err != nil {
		return err
	}
	chk.Matrix("grad_logprob", split(rows, grad), wg)
	return nil
}

func runPolicyLoss(reg Losses, c *conformance.Case, chk *conformance.Checker, want map[string]json.RawMessage) error {
	lc, err := lossInputs(c)
	if err != nil {
		return err
	}
	b, err := lc.batch(0, lc.rows.N())
	if err != nil {
		return err
	}
	l, m, grad, err := evalLoss(reg, c, b)
	if err != nil || chk == nil {
		return err
	}
	return checkLoss(chk, want, lc.rows, l, m, grad)
}

func runPolicyMicro(reg Losses, c *conformance.Case, chk *conformance.Checker, want map[string]json.RawMessage) error {
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
	for _, n := range parts {
		if lo+n > lc.rows.N() {
			return fmt.Errorf("call.micro_batch_rows %v: more rows than the batch's %d", parts, lc.rows.N())
		}
		b, err := lc.batch(lo, lo+n)
		if err != nil {
			return err
		}
		l, m, g, err := evalLoss(reg, c, b)
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
		Micro []conformance.Float `json:"micro_losses"`
		Sum   conformance.Float   `json:"loss_sum"`
		Met   []json.RawMessage   `json:"micro_metrics"`
	}
	raw, _ := json.Marshal(want)
	if err := json.Unmarshal(raw, &w); err != nil {
		return err
	}
	chk.Vector("micro_losses", losses, floats(w.Micro))
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
	wg, err := conformance.Matrix(want["grad_logprob"])
	if err != nil {
		return err
	}
	chk.Matrix("grad_logprob", split(lc.rows, grad), wg)
	return nil
}

func runDecoupled(reg Losses, c *conformance.Case, chk *conformance.Checker, want map[string]json.RawMessage) error {
	var rc map[string]json.RawMessage
	if err := json.Unmarshal(c.Args["rollout_correction"], &rc); err != nil {
		return fmt.Errorf("args.rollout_correction: %w", err)
	}
	rows, w, mask, err := correct(c, rc, chk, want, "rollout_corr_metrics")
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
	l, m, grad, err := evalLoss(reg, c, b)
	if err != nil || chk == nil {
		return err
	}
	return checkLoss(chk, want, rows, l, m, grad)
}
