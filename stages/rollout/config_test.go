package rollout

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/agg"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		in   map[string]any
		want string // Config.String()
	}{
		{"yaml defaults", map[string]any{},
			"rollout_is=null rollout_is_threshold=2 rollout_is_batch_normalize=false rollout_rs=null rollout_rs_threshold=null bypass_mode=false loss_type=ppo_clip"},
		{"preset", map[string]any{"preset": "decoupled_seq_is_rs"},
			"rollout_is=sequence rollout_is_threshold=2 rollout_is_batch_normalize=false rollout_rs=seq_sum_k1 rollout_rs_threshold=0.5_2.0 bypass_mode=false loss_type=ppo_clip"},
		{"preset overridden", map[string]any{"preset": "bypass_pg_is", "rollout_is_threshold": 5, "rollout_rs": "seq_max_k2", "rollout_rs_threshold": 0.05},
			"rollout_is=sequence rollout_is_threshold=5 rollout_is_batch_normalize=false rollout_rs=seq_max_k2 rollout_rs_threshold=0.05 bypass_mode=true loss_type=reinforce"},
		{"icepop preset", map[string]any{"preset": "bypass_pg_token_icepop"},
			"rollout_is=token rollout_is_threshold=0.5_5.0 rollout_is_batch_normalize=false rollout_rs=null rollout_rs_threshold=null bypass_mode=true loss_type=reinforce"},
		{"icepop string threshold", map[string]any{"rollout_is": "sequence", "rollout_is_threshold": " 0.5_2 "},
			"rollout_is=sequence rollout_is_threshold= 0.5_2  rollout_is_batch_normalize=false rollout_rs=null rollout_rs_threshold=null bypass_mode=false loss_type=ppo_clip"},
		{"null threshold", map[string]any{"rollout_is": "token", "rollout_is_threshold": nil},
			"rollout_is=token rollout_is_threshold=null rollout_is_batch_normalize=false rollout_rs=null rollout_rs_threshold=null bypass_mode=false loss_type=ppo_clip"},
	}
	for _, tc := range tests {
		c, err := Parse(tc.in)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := c.String(); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
	if c, _ := Parse(map[string]any{"rollout_is": "token", "rollout_is_threshold": nil}); c.weighted() {
		t.Error("a null threshold must disable the weights")
	}
	// verl parses the threshold only when it computes weights.
	if _, err := Parse(map[string]any{"rollout_is_threshold": "5.0_0.5"}); err != nil {
		t.Errorf("bad threshold without rollout_is: %v", err)
	}
	// lower = upper is allowed, for IcePop and for k1.
	for _, in := range []map[string]any{{"rollout_is": "token", "rollout_is_threshold": "2_2"}, {"rollout_rs": "token_k1", "rollout_rs_threshold": "1.0_1.0"}} {
		if _, err := Parse(in); err != nil {
			t.Errorf("%v: %v", in, err)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		in   map[string]any
		want string // the key named and part of the message
	}{
		{map[string]any{"rollout_iss": "token"}, "rollout_correction.rollout_iss: unknown key"},
		{map[string]any{"rollout_is": "tokens"}, "rollout_correction.rollout_is: Invalid rollout_is: tokens"},
		{map[string]any{"rollout_is": "token", "rollout_is_threshold": -1.0}, "rollout_is_threshold upper bound must be positive, got -1.0."},
		{map[string]any{"rollout_is": "token", "rollout_is_threshold": 0}, "rollout_is_threshold upper bound must be positive, got 0.0."},
		{map[string]any{"rollout_is": "token", "rollout_is_threshold": "0"}, "rollout_is_threshold upper bound must be positive, got 0.0."},
		{map[string]any{"rollout_is": "token", "rollout_is_threshold": true}, "rollout_is_threshold must be specified as a float or a string threshold specification, not a boolean."},
		{map[string]any{"rollout_is": "sequence", "rollout_is_threshold": []any{0.5, 2.0}}, "rollout_is_threshold must be a float or a string threshold specification."},
		{map[string]any{"rollout_is": "token", "rollout_is_threshold": "  "}, "rollout_is_threshold must not be an empty string."},
		{map[string]any{"rollout_is": "token", "rollout_is_threshold": "two"}, "Invalid rollout_is_threshold 'two'."},
		{map[string]any{"rollout_is": "token", "rollout_is_threshold": "0.5_"}, "Invalid rollout_is_threshold '0.5_'."},
		{map[string]any{"rollout_is": "token", "rollout_is_threshold": "x_2"}, "Invalid rollout_is_threshold 'x_2'."},
		{map[string]any{"rollout_is": "token", "rollout_is_threshold": "0_2"}, "rollout_is_threshold lower bound must be positive, got 0.0."},
		{map[string]any{"rollout_is": "token", "rollout_is_threshold": "0.5_-2"}, "rollout_is_threshold upper bound must be positive, got -2.0."},
		{map[string]any{"rollout_is": "token", "rollout_is_threshold": "5.0_0.5"}, "rollout_is_threshold lower bound must be <= upper bound."},
		{map[string]any{"rollout_rs": "token_k1", "rollout_rs_threshold": "2.0_0.5"}, "Thresholds for option 'token_k1' must be lower <= upper, got 2.0_0.5."},
		{map[string]any{"rollout_rs": "seq_sum_k1", "rollout_rs_threshold": 0.5}, "Thresholds for option 'seq_sum_k1' must be lower <= upper, got 0.5."},
		{map[string]any{"rollout_is_batch_normalize": "yes"}, "rollout_correction.rollout_is_batch_normalize: want true or false"},
		{map[string]any{"rollout_rs": "token_k4", "rollout_rs_threshold": 2.0}, "Invalid rollout_rs option: token_k4. Must be one of ['seq_max_k2', 'seq_max_k3', 'seq_mean_k1',"},
		{map[string]any{"rollout_rs": " , "}, "rollout_rs must contain at least one valid option."},
		{map[string]any{"rollout_rs": "token_k1"}, "rollout_rs_threshold must be explicitly provided"},
		{map[string]any{"rollout_rs": "token_k1,token_k1", "rollout_rs_threshold": "0.5_2,0.4_3"}, "exactly 1 thresholds"},
		{map[string]any{"rollout_rs": "token_k2", "rollout_rs_threshold": "0.5_2"}, "must provide a single upper bound without '_'. Received '0.5_2'."},
		{map[string]any{"rollout_rs": "token_k3", "rollout_rs_threshold": -0.1}, "Threshold for option 'token_k3' must be positive, got -0.1."},
		{map[string]any{"rollout_rs": "seq_mean_k1", "rollout_rs_threshold": "0_2"}, "Thresholds for option 'seq_mean_k1' must be positive, got 0_2."},
		{map[string]any{"rollout_rs": "seq_mean_k1", "rollout_rs_threshold": "a_2"}, "Invalid numeric threshold 'a_2' for option 'seq_mean_k1'."},
		{map[string]any{"loss_type": "ppo"}, "Invalid loss_type: ppo."},
		{map[string]any{"preset": "nope"}, "rollout_correction.preset: unknown rollout_correction preset"},
	}
	for _, tc := range tests {
		_, err := Parse(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, schema.ErrBadInput) {
			t.Errorf("%v: error %v, want one containing %q", tc.in, err, tc.want)
		}
	}
}

func TestPresetsValid(t *testing.T) {
	for _, name := range Presets().Names() {
		c, err := Parse(map[string]any{"preset": name})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if _, err := New(c); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if n := len(Presets().Names()); n != 19 {
		t.Errorf("%d presets, want 19", n)
	}
	if n := len(Options().Names()); n != 11 {
		t.Errorf("%d rejection options, want 11", n)
	}
}

// TestRatioBounds: verl's "lo_hi" keeps rollout/old ∈ [lo, hi] (RC-01);
// ratio_bounds keeps old/rollout ∈ [lo, hi]. A token with old/rollout = 1.4
// passes "0.8_1.5" only with the fix; one with 0.75 only without it.
func TestRatioBounds(t *testing.T) {
	in := Input{Rows: agg.NewRows([]int{2}), Old: []float64{math.Log(1.4), math.Log(0.75)}, Rollout: []float64{0, 0}, Mask: []float64{1, 1}}
	for _, fix := range []bool{false, true} {
		cfg := Default()
		cfg.RS, cfg.RSThreshold, cfg.RatioBounds = "token_k1", "0.8_1.5", fix
		c, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, m, _, err := c.Correct(in)
		if err != nil {
			t.Fatal(err)
		}
		want := []float64{0, 1}
		if fix {
			want = []float64{1, 0}
		}
		if m[0] != want[0] || m[1] != want[1] {
			t.Errorf("ratio_bounds=%v: mask %v, want %v", fix, m, want)
		}
	}
}

// TestZeroMaskedWeights: a NaN log-prob at a masked position gives a NaN
// token weight there as verl (RC-06), 0 with zero_masked_weights.
func TestZeroMaskedWeights(t *testing.T) {
	in := Input{Rows: agg.NewRows([]int{3}), Old: []float64{-1, math.NaN(), -2}, Rollout: []float64{-1.1, -1, -2}, Mask: []float64{1, 0, 1}}
	for _, fix := range []bool{false, true} {
		cfg := Default()
		cfg.IS, cfg.ZeroMaskedWeights = "token", fix
		c, _ := New(cfg)
		w, _, met, err := c.Correct(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := w[1]; fix && got != 0 || !fix && !math.IsNaN(got) {
			t.Errorf("zero_masked_weights=%v: masked weight %v", fix, got)
		}
		if math.IsNaN(met[Prefix+"rollout_is_mean"]) {
			t.Error("a NaN at a masked position reached the metrics")
		}
	}
}

// TestIcePop: "lower_upper" keeps a raw weight within [lower, upper]
// (inclusive), sets it to 0 outside and where it is NaN, and leaves the
// mask alone; rollout_is_oob_ratio counts the valid tokens outside the
// bounds but not the NaN one, the ratio fractions measure the raw weights,
// the other metrics the applied ones.
func TestIcePop(t *testing.T) {
	ln := math.Log
	// raw weights 0.25, 0.5, 3, 4 (masked), 8, NaN
	in := Input{Rows: agg.NewRows([]int{3, 3}), Old: []float64{ln(0.25), ln(0.5), ln(3), ln(4), ln(8), math.NaN()},
		Rollout: make([]float64, 6), Mask: []float64{1, 1, 1, 0, 1, 1}}
	cfg := Default()
	cfg.IS, cfg.ISThreshold = "token", "0.5_4"
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w, m, met, err := c.Correct(in)
	if err != nil {
		t.Fatal(err)
	}
	wantW := []float64{0, 0.5, 3, 0, 0, 0}
	for i := range wantW {
		if math.Abs(w[i]-wantW[i]) > 1e-12 || m[i] != in.Mask[i] {
			t.Errorf("token %d: weight %v mask %v, want %v and %v", i, w[i], m[i], wantW[i], in.Mask[i])
		}
	}
	N := 5 + eps
	for name, want := range map[string]float64{
		"rollout_is_oob_ratio":           2 / N, // 0.25 and 8; not the NaN
		"rollout_is_ratio_fraction_high": 1 / N, // 8 (raw)
		"rollout_is_ratio_fraction_low":  1 / N, // 0.25 (raw)
		"rollout_is_mean":                3.5 / N,
		"rollout_is_max":                 3,
		"rollout_is_min":                 0,
	} {
		if got := met[Prefix+name]; math.Abs(got-want) > 1e-12 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	cfg.ISThreshold = 4.0 // TIS: no oob metric, the NaN stays
	c, _ = New(cfg)
	w, _, met, _ = c.Correct(in)
	if _, ok := met[Prefix+"rollout_is_oob_ratio"]; ok || w[4] != 4 || !math.IsNaN(w[5]) {
		t.Errorf("TIS: weights %v, oob metric present %v", w, ok)
	}
}
