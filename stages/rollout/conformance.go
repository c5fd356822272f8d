package rollout

import (
	"encoding/json"
	"fmt"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/conformance"
)

// ConformanceMethod runs one call form of golden kind "rollout_correction";
// chk and want are nil for error cases.
type ConformanceMethod func(c *conformance.Case, chk *conformance.Checker, want map[string]json.RawMessage) error

// ConformanceRunner returns the runner of golden kind "rollout_correction"
// (verl), dispatching on call.method: this package's call forms (the
// assembled correction call, the off-policy metrics, agg_loss and its
// micro-batch composition) and those of more, the forms that need a policy
// loss, which a package above this one and package loss supplies.
func ConformanceRunner(more map[string]ConformanceMethod) conformance.Runner {
	return func(c *conformance.Case, chk *conformance.Checker) error {
		var method string
		if err := json.Unmarshal(c.Call["method"], &method); err != nil {
			return fmt.Errorf("case %s: call.method: %w", c.Name, err)
		}
		run, ok := methods[method]
		if !ok {
			run, ok = more[method]
		}
		if !ok {
			return fmt.Errorf("case %s: unknown call.method %q", c.Name, method)
		}
		if wantErr, _ := c.ExpectedError(); wantErr {
			return run(c, nil, nil)
		}
		var want map[string]json.RawMessage
		if err := json.Unmarshal(c.Expected, &want); err != nil {
			return err
		}
		return run(c, chk, want)
	}
}

var methods = map[string]ConformanceMethod{
	"rollout_correction":    runCorrection,
	"offpolicy_metrics":     runOffPolicy,
	"agg_loss":              runAggLoss,
	"agg_loss_microbatches": runAggMicro,
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

// ConformanceRolloutLogprob is the golden files' name of the rollout log-probs (the
// store's logprobs), an input of the correction and of no loss.
const ConformanceRolloutLogprob = "rollout_logprob"

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

// ConformanceCorrect runs the assembled call of a golden case, with
// correction arguments rc, on its old/rollout/mask inputs and checks weights,
// mask and metrics under the given expected keys (chk nil: no checks); it
// returns the layout, the weights (nil when none) and the mask.
func ConformanceCorrect(c *conformance.Case, rc map[string]json.RawMessage, chk *conformance.Checker, want map[string]json.RawMessage, metricsKey string) (agg.Rows, []float64, []float64, error) {
	rows, in, err := inputs(c, string(schema.InOldLogprob), ConformanceRolloutLogprob, string(schema.InActionMask))
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
	if err := chk.MatrixJSON("action_mask", split(rows, m), want["action_mask"]); err != nil {
		return rows, nil, nil, err
	}
	if err := chk.MetricsJSON(metricsKey, met, want[metricsKey]); err != nil {
		return rows, nil, nil, err
	}
	return rows, w, m, nil
}

func runCorrection(c *conformance.Case, chk *conformance.Checker, want map[string]json.RawMessage) error {
	_, _, _, err := ConformanceCorrect(c, c.Args, chk, want, "metrics")
	return err
}

func runOffPolicy(c *conformance.Case, chk *conformance.Checker, want map[string]json.RawMessage) error {
	var pass bool
	if err := json.Unmarshal(c.Call["pass_rollout_logprob"], &pass); err != nil {
		return fmt.Errorf("call.pass_rollout_logprob: %w", err)
	}
	names := []string{string(schema.InOldLogprob), string(schema.InActionMask)}
	if pass {
		names = append(names, ConformanceRolloutLogprob)
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
	return chk.MetricsJSON("metrics", got, want["metrics"])
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

func runAggLoss(c *conformance.Case, chk *conformance.Checker, want map[string]json.RawMessage) error {
	md, g, err := globalOf(c.Args)
	if err != nil {
		return err
	}
	rows, in, err := inputs(c, "loss_mat", string(schema.InActionMask))
	if err != nil {
		return err
	}
	grad := make([]float64, rows.Tokens())
	v, err := g.Loss(rows, in[0], in[1], md, grad)
	if err != nil || chk == nil {
		return err
	}
	var wl conformance.Float
	if err := json.Unmarshal(want["loss"], &wl); err != nil {
		return err
	}
	chk.Scalar("loss", v, float64(wl))
	return chk.MatrixJSON("grad_loss_mat", split(rows, grad), want["grad_loss_mat"])
}

func runAggMicro(c *conformance.Case, chk *conformance.Checker, want map[string]json.RawMessage) error {
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
	if p := v.String("path"); p != "engine" {
		return fmt.Errorf("unknown path %q (verl's engine workers are the only path)", p)
	}
	md, g, err := globalOf(c.Args)
	if err != nil {
		return err
	}
	comp, err := agg.ComposeEngine(mbs, md, g)
	if err != nil || chk == nil {
		return err
	}
	var w struct {
		Micro json.RawMessage   `json:"micro_losses"`
		Ranks json.RawMessage   `json:"rank_sums"`
		Obj   conformance.Float `json:"objective"`
	}
	raw, _ := json.Marshal(want)
	if err := json.Unmarshal(raw, &w); err != nil {
		return err
	}
	micro, err := conformance.Floats(w.Micro)
	if err != nil {
		return err
	}
	ranks, err := conformance.Floats(w.Ranks)
	if err != nil {
		return err
	}
	chk.Vector("micro_losses", comp.MicroLosses, micro)
	chk.Vector("rank_sums", comp.RankSums, ranks)
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
		if err := chk.MatrixJSON(fmt.Sprintf("grad_loss_mat[%d]", i), split(mbs[i].Rows, comp.Grad[i]), wg[i]); err != nil {
			return err
		}
	}
	return nil
}
