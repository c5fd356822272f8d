package rollout

import (
	"fmt"
	"sort"
	"strings"

	"github.com/rftpipe/rftpipe/stages/registry"
)

// Config is verl's algorithm.rollout_correction section
// (RolloutCorrectionConfig), plus two opt-in fixes of upstream quirks.
type Config struct {
	// IS is rollout_is: "" (null: no weights), "token" or "sequence".
	IS string
	// ISThreshold is rollout_is_threshold, the truncation cap C; nil (null)
	// also disables the weights, as upstream.
	ISThreshold *float64
	// BatchNormalize is rollout_is_batch_normalize: divide the truncated
	// weights by their batch mean (needs the first pass, see Norm).
	BatchNormalize bool
	// RS is rollout_rs: "" (null) or a comma list of Options names.
	RS string
	// RSThreshold is rollout_rs_threshold: nil, a number or a string.
	RSThreshold any
	// BypassMode is bypass_mode: the correction runs inside the bypass_mode
	// policy loss instead of on the batch (nothing to write).
	BypassMode bool
	// LossType is loss_type, the loss of bypass mode: ppo_clip or reinforce.
	LossType string
	// RatioBounds (rftpipe, opt-in; quirk RC-01) makes k1 bounds "lo_hi"
	// keep old/rollout ∈ [lo, hi] as verl's docs say; verl's code keeps
	// rollout/old ∈ [lo, hi]. Only asymmetric bounds differ.
	RatioBounds bool
	// ZeroMaskedWeights (rftpipe, opt-in; quirk RC-06) writes weight 0 at
	// every masked position; verl writes NaN where a masked position's log
	// ratio is NaN (token level).
	ZeroMaskedWeights bool
}

// Keys are the configuration keys, verl's then rftpipe's ("preset" names a
// preset whose values the other keys override).
var Keys = []string{"rollout_is", "rollout_is_threshold", "rollout_is_batch_normalize", "rollout_rs",
	"rollout_rs_threshold", "bypass_mode", "loss_type", "ratio_bounds", "zero_masked_weights", "preset"}

// Default is the section as verl's YAML (rollout_correction.yaml) fills it:
// every feature off, metrics only.
func Default() Config {
	c := 2.0
	return Config{ISThreshold: &c, LossType: "ppo_clip"}
}

func cfg(is string, rs string, rsThr any, bypass bool, loss string) Config {
	c := Default()
	c.IS, c.RS, c.RSThreshold, c.BypassMode, c.LossType = is, rs, rsThr, bypass, loss
	return c
}

// Presets are verl's RolloutCorrectionConfig class methods at their default
// arguments (algorithm.py); a section's "preset" key selects one.
var Presets = registry.Of("rollout_correction preset", map[string]Config{
	"decoupled_token_is":         cfg("token", "", nil, false, "ppo_clip"),
	"decoupled_seq_is":           cfg("sequence", "", nil, false, "ppo_clip"),
	"decoupled_seq_is_rs":        cfg("sequence", "seq_sum_k1", "0.5_2.0", false, "ppo_clip"),
	"decoupled_geo_rs":           cfg("", "seq_mean_k1", "0.999_1.001", false, "ppo_clip"),
	"decoupled_geo_rs_seq_tis":   cfg("sequence", "seq_mean_k1", "0.999_1.001", false, "ppo_clip"),
	"decoupled_geo_rs_token_tis": cfg("token", "seq_mean_k1", "0.999_1.001", false, "ppo_clip"),
	"decoupled_k3_rs":            cfg("", "seq_mean_k3", 0.01, false, "ppo_clip"),
	"decoupled_k3_rs_seq_tis":    cfg("sequence", "seq_mean_k3", 0.01, false, "ppo_clip"),
	"decoupled_k3_rs_token_tis":  cfg("token", "seq_mean_k3", 0.01, false, "ppo_clip"),
	"bypass_ppo_clip":            cfg("", "", nil, true, "ppo_clip"),
	"bypass_ppo_clip_geo_rs":     cfg("", "seq_mean_k1", "0.999_1.001", true, "ppo_clip"),
	"bypass_ppo_clip_k3_rs":      cfg("", "seq_mean_k3", 0.01, true, "ppo_clip"),
	"bypass_pg_is":               cfg("sequence", "", nil, true, "reinforce"),
	"bypass_pg_geo_rs":           cfg("", "seq_mean_k1", "0.999_1.001", true, "reinforce"),
	"bypass_pg_geo_rs_seq_tis":   cfg("sequence", "seq_mean_k1", "0.999_1.001", true, "reinforce"),
	"bypass_pg_geo_rs_token_tis": cfg("token", "seq_mean_k1", "0.999_1.001", true, "reinforce"),
	"disabled":                   cfg("", "", nil, false, "ppo_clip"),
})

// Parse reads a rollout_correction section (YAML/JSON values: string,
// float64, int, bool, nil) with verl's keys: absent keys take verl's YAML
// defaults, or the preset's values when "preset" is given. Unknown keys,
// wrong types and invalid values are errors naming the key; the result is
// validated as New does.
func Parse(m map[string]any) (Config, error) {
	c := Default()
	if p, ok := m["preset"]; ok {
		name, ok := p.(string)
		if !ok {
			return c, badKey("preset", "want a preset name, got %v", p)
		}
		pc, err := Presets.Get(name)
		if err != nil {
			return c, badKey("preset", "%v", err)
		}
		c = pc
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := m[k]
		var err error
		switch k {
		case "preset":
		case "rollout_is":
			c.IS, err = optString(k, v)
		case "rollout_is_threshold":
			if v == nil {
				c.ISThreshold = nil
				break
			}
			var x float64
			x, err = number(k, v)
			c.ISThreshold = &x
		case "rollout_is_batch_normalize":
			c.BatchNormalize, err = boolean(k, v)
		case "rollout_rs":
			c.RS, err = optString(k, v)
		case "rollout_rs_threshold":
			switch t := v.(type) {
			case nil, string, float64:
				c.RSThreshold = t
			case int:
				c.RSThreshold = t
			case int64:
				c.RSThreshold = t
			default:
				err = badKey(k, "want a number or a string, got %v", v)
			}
		case "bypass_mode":
			c.BypassMode, err = boolean(k, v)
		case "loss_type":
			c.LossType, err = optString(k, v)
		case "ratio_bounds":
			c.RatioBounds, err = boolean(k, v)
		case "zero_masked_weights":
			c.ZeroMaskedWeights, err = boolean(k, v)
		default:
			err = badKey(k, "unknown key (valid: %s)", strings.Join(Keys, ", "))
		}
		if err != nil {
			return c, err
		}
	}
	if _, err := c.rules(); err != nil {
		return c, err
	}
	return c, c.validate()
}

// validate checks the IS and loss_type keys as verl does when it uses them.
func (c Config) validate() error {
	if c.IS != "" && c.IS != "token" && c.IS != "sequence" {
		return badKey("rollout_is", "Invalid rollout_is: %s. Must be one of {'token', 'sequence'}.", c.IS)
	}
	if c.weighted() && !(*c.ISThreshold > 0) {
		return badKey("rollout_is_threshold", "rollout_is_threshold must be positive, got %v.", *c.ISThreshold)
	}
	if c.LossType != "ppo_clip" && c.LossType != "reinforce" {
		return badKey("loss_type", "Invalid loss_type: %s. Must be 'reinforce' or 'ppo_clip'.", c.LossType)
	}
	return nil
}

// weighted reports whether IS weights are computed (rollout_is and its
// threshold both set).
func (c Config) weighted() bool { return c.IS != "" && c.ISThreshold != nil }

// rules parses the rejection-sampling options (nil when rollout_rs is null).
func (c Config) rules() ([]rule, error) {
	if c.RS == "" {
		return nil, nil
	}
	return parseRules(c.RS, c.RSThreshold, c.RatioBounds)
}

func optString(k string, v any) (string, error) {
	switch s := v.(type) {
	case nil:
		return "", nil
	case string:
		if strings.EqualFold(s, "null") || strings.EqualFold(s, "none") {
			return "", nil
		}
		return s, nil
	}
	return "", badKey(k, "want a string or null, got %v", v)
}

func number(k string, v any) (float64, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case int:
		return float64(x), nil
	case int64:
		return float64(x), nil
	}
	return 0, badKey(k, "want a number, got %v", v)
}

func boolean(k string, v any) (bool, error) {
	if b, ok := v.(bool); ok {
		return b, nil
	}
	return false, badKey(k, "want true or false, got %v", v)
}

// String is the section in verl's keys, for logs.
func (c Config) String() string {
	thr := "null"
	if c.ISThreshold != nil {
		thr = fmt.Sprint(*c.ISThreshold)
	}
	or := func(s string) string {
		if s == "" {
			return "null"
		}
		return s
	}
	return fmt.Sprintf("rollout_is=%s rollout_is_threshold=%s rollout_is_batch_normalize=%v rollout_rs=%s rollout_rs_threshold=%v bypass_mode=%v loss_type=%s",
		or(c.IS), thr, c.BatchNormalize, or(c.RS), c.RSThreshold, c.BypassMode, c.LossType)
}
