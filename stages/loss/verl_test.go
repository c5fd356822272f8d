package loss

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

var w3 = [][]float64{{0.9, 1.3, 2.0, 0}, {0.5, 1.0, 1.7, 0.8}, {1.1, 0.95, 0, 0}}

// weighted is the test batch with rollout_is_weights w3 (or w, when given).
func weighted(t *testing.T, w [][]float64) *tokens.Batch {
	b := batch(t, lp3, old3, nil, adv3, mask3)
	if w == nil {
		w = w3
	}
	if err := b.SetMatrix(tokens.RolloutISWeights, w); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWeightedGradientFiniteDifference checks dLoss/dlogprob of the losses
// with IS weights and verl's aggregation against central differences.
func TestWeightedGradientFiniteDifference(t *testing.T) {
	tests := []struct {
		loss string
		args args.Values
	}{
		{"ppo", args.Values{"clip_range": 0.2, "dp_size": 2, "batch_num_tokens": 21.0}},
		{"ppo", args.Values{"clip_range": 0.2, "loss_agg_mode": "seq-mean-token-mean", "global_batch_size": 7.0}},
		{"ppo", args.Values{"clip_range": 0.2, "loss_agg_mode": "seq-mean-token-sum-norm", "dp_size": 1}},
		{"ppo", args.Values{"clip_range": 0.2, "loss_agg_mode": "seq-mean-token-sum-norm", "dp_size": 2, "global_batch_size": 5.0, "loss_scale_factor": 3.0}},
		{"gpg", args.Values{"loss_agg_mode": "token-sum", "dp_size": 2}},
		{"sapo", args.Values{"verl": true}},
		{"gpg", args.Values{"loss_agg_mode": "seq-mean-token-sum"}},
		{"reinforce", nil},
		{"geo_mean", args.Values{"clip_range": 0.3}},
		{"geo_mean", args.Values{"clip_range": 0.05}},
	}
	for _, tc := range tests {
		b := weighted(t, nil)
		_, grad := eval(t, tc.loss, tc.args, b)
		checkFiniteDifference(t, tc.loss, tc.args, b, grad)
	}
}

// TestUnitWeights: weights of 1 change nothing (geo_mean: up to its
// ln(w + 1e-10)); weights scale the per-token loss (token-mean of a linear
// loss: gpg).
func TestUnitWeights(t *testing.T) {
	ones := each(func(b, t int) float64 { return 1 })
	for _, name := range []string{"ppo", "gspo", "sapo", "cispo", "gpg", "reinforce", "geo_mean"} {
		plain, pg := eval(t, name, nil, batch(t, lp3, old3, nil, adv3, mask3))
		unit, ug := eval(t, name, nil, weighted(t, ones))
		same := func(a, b float64) bool { return a == b || name == "geo_mean" && math.Abs(a-b) <= 1e-9*math.Abs(b) }
		if !same(unit.Loss, plain.Loss) {
			t.Errorf("%s: loss %v with unit weights, %v without", name, unit.Loss, plain.Loss)
		}
		for i := range pg {
			if !same(ug[i], pg[i]) {
				t.Errorf("%s: grad[%d] %v with unit weights, %v without", name, i, ug[i], pg[i])
			}
		}
	}
	res, _ := eval(t, "gpg", nil, weighted(t, nil))
	want, n := 0.0, 0.0
	for b := range lp3 {
		for i := range lp3[b] {
			want += -adv3[b][i] * lp3[b][i] * w3[b][i] * mask3[b][i]
			n += mask3[b][i]
		}
	}
	if !near(res.Loss, want/(n+1e-8)) {
		t.Errorf("gpg weighted loss %v, want %v", res.Loss, want/(n+1e-8))
	}
}

// TestVerlAggregation: token-sum is D·Σ pg·w·m (gpg: pg = −A·lp), with or
// without verl's arguments; sum-norm is the seq-mean-token-sum value over
// loss_scale_factor; with dp_size > 1 a missing global count is verl's
// error, at evaluation.
func TestVerlAggregation(t *testing.T) {
	sum, rows := 0.0, 0.0
	for b := range lp3 {
		n := 0.0
		for i := range lp3[b] {
			sum += -adv3[b][i] * lp3[b][i] * w3[b][i] * mask3[b][i]
			n += mask3[b][i]
		}
		if n > 0 {
			rows++
		}
	}
	for _, tc := range []struct {
		args args.Values
		want float64
	}{
		{args.Values{"loss_agg_mode": "token-sum"}, sum},
		{args.Values{"loss_agg_mode": "token-sum", "dp_size": 2}, 2 * sum},
		{args.Values{"loss_agg_mode": "seq-mean-token-sum-norm", "dp_size": 1, "loss_scale_factor": 4.0}, sum / rows / 4},
		{args.Values{"loss_agg_mode": "seq-mean-token-sum-norm", "dp_size": 2, "global_batch_size": 8.0, "loss_scale_factor": 4.0}, sum / 8 * 2 / 4},
	} {
		res, _ := eval(t, "gpg", tc.args, weighted(t, nil))
		if !near(res.Loss, tc.want) {
			t.Errorf("gpg %v: loss %v, want %v", tc.args, res.Loss, tc.want)
		}
	}
	for _, tc := range []struct {
		args args.Values
		want string
	}{
		{args.Values{"clip_range": 0.2, "dp_size": 2, "global_batch_size": 8.0}, "(global) batch_num_tokens is required when dp_size > 1"},
		{args.Values{"clip_range": 0.2, "dp_size": 2, "batch_num_tokens": 20.0, "loss_agg_mode": "seq-mean-token-mean"}, "global_batch_size is required when dp_size > 1"},
	} {
		l, err := New(Default(), "ppo", tc.args)
		if err != nil {
			t.Fatal(err)
		}
		b := weighted(t, nil)
		if _, err := l.Eval(b, make([]float64, b.Rows.Tokens())); !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ppo %v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestVerlGSPOCap: verl caps the sequence log ratio at 10; the capped rows
// have no gradient.
func TestVerlGSPOCap(t *testing.T) {
	lp := [][]float64{{0, 0}, {-0.1, -0.3}}
	old := [][]float64{{-12, -12}, {-0.2, -0.2}}
	adv := [][]float64{{-1, -1}, {1, 1}}
	mask := [][]float64{{1, 1}, {1, 1}}
	res, grad := eval(t, "gspo", args.Values{"verl": true, "clip_range_low": 10.0, "clip_range_high": 1e6}, batch(t, lp, old, nil, adv, mask))
	if grad[0] != 0 || grad[1] != 0 || grad[2] == 0 {
		t.Errorf("grad %v: want 0 on the capped row only", grad)
	}
	// verl's seq-mean-token-mean: row 0 -A·e^10 per token, row 1
	// -A·e^{(0.1 - 0.1)/2} = -1 per token.
	n := 2 + 1e-8
	want := (2*math.Exp(10)/n - 2/n) / 2
	if math.Abs(res.Loss-want) > 1e-12*want {
		t.Errorf("loss %v, want %v", res.Loss, want)
	}
}

// TestWeightsRefused: a loss that does not take rollout_is_weights refuses
// a batch that has them rather than ignoring them.
func TestWeightsRefused(t *testing.T) {
	l, err := New(Default(), "topr", nil)
	if err != nil {
		t.Fatal(err)
	}
	b := weighted(t, nil)
	if _, err := l.Eval(b, make([]float64, b.Rows.Tokens())); !errors.Is(err, schema.ErrBadInput) {
		t.Errorf("topr with weights: error %v, want bad input", err)
	}
	for _, a := range []args.Values{{"dp_size": 0}, {"batch_num_tokens": -1.0}, {"global_batch_size": 0.0}} {
		if _, err := New(Default(), "ppo", a); !errors.Is(err, schema.ErrBadInput) {
			t.Errorf("ppo %v: error %v, want bad input", a, err)
		}
	}
}

// TestBypassStreamEqualsWhole: bypass_mode evaluated in windows of rows
// (Stream: a statistics pass over every window, then each window corrected
// and evaluated) equals its evaluation on the whole batch at once — loss,
// metrics and gradient — for both loss types, with rejection that drops
// tokens and rows and batch-normalised weights.
func TestBypassStreamEqualsWhole(t *testing.T) {
	base := args.Values{"rollout_is": "token", "rollout_is_batch_normalize": true,
		"rollout_rs": "token_k1,seq_mean_k3", "rollout_rs_threshold": "0.9_1.1,0.004"}
	for _, a := range []args.Values{
		base,
		args.Overlay(base, args.Values{"loss_type": "reinforce", "rollout_is": "sequence", "loss_agg_mode": "seq-mean-token-mean"}),
		args.Overlay(base, args.Values{"loss_type": "reinforce", "batch_num_tokens": 5000.0}),
	} {
		s, err := Default().Get("bypass_mode")
		if err != nil {
			t.Fatal(err)
		}
		d := s.New
		l, err := d.New(args.Overlay(d.DefaultArgs(), a))
		if err != nil {
			t.Fatal(err)
		}
		b := tokens.Synthetic(61, 40, 3)
		want := make([]float64, b.Rows.Tokens())
		whole, err := l.Eval(b, want)
		if err != nil {
			t.Fatal(err)
		}
		if whole.Metrics["rollout_corr/rollout_rs_masked_fraction"] == 0 || whole.Metrics["rollout_corr/rollout_rs_seq_mean_k3_masked_fraction"] == 0 {
			t.Fatalf("%v: nothing rejected", a)
		}
		out, grad := evalInWindows(t, l, b, 7)
		close := func(x, y float64) bool { return x == y || math.Abs(x-y) <= 1e-12*math.Max(1, math.Abs(y)) }
		if !close(out.Loss, whole.Loss) {
			t.Errorf("%v: loss in windows %v, whole %v", a, out.Loss, whole.Loss)
		}
		for k, v := range whole.Metrics {
			if got, ok := out.Metrics[k]; !ok || !close(got, v) {
				t.Errorf("%v: %s in windows %v, whole %v", a, k, got, v)
			}
		}
		if len(out.Metrics) != len(whole.Metrics) {
			t.Errorf("%v: %d metrics in windows, %d whole", a, len(out.Metrics), len(whole.Metrics))
		}
		for i := range want {
			if !close(grad[i], want[i]) {
				t.Fatalf("%v: gradient %d in windows %v, whole %v", a, i, grad[i], want[i])
			}
		}
	}
}
