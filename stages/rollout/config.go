package rollout

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/rftpipe/rftpipe/stages/registry"
)

// Config is verl's algorithm.rollout_correction section
// (RolloutCorrectionConfig), plus two opt-in fixes of upstream quirks.
type Config struct {
	// IS is rollout_is: "" (null: no weights), "token" or "sequence".
	IS string
	// ISThreshold is rollout_is_threshold as given: a number or a number
	// string, the truncation cap C (TIS), or a string "lower_upper", the
	// IcePop bounds (weights outside [lower, upper] set to 0); nil (null)
	// also disables the weights, as upstream. See parseISThreshold.
	ISThreshold any
	// BatchNormalize is rollout_is_batch_normalize: divide the applied
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
	return Config{ISThreshold: 2.0, LossType: "ppo_clip"}
}

func cfg(is string, rs string, rsThr any, bypass bool, loss string) Config {
	c := Default()
	c.IS, c.RS, c.RSThreshold, c.BypassMode, c.LossType = is, rs, rsThr, bypass, loss
	return c
}

// icePop is a preset with token-level IcePop weights at verl's default
// bounds [0.5, 5.0].
func icePop(bypass bool, loss string) Config {
	c := cfg("token", "", nil, bypass, loss)
	c.ISThreshold = "0.5_5.0"
	return c
}

// Presets returns verl's RolloutCorrectionConfig class methods at their
// default arguments (algorithm.py, verl 1dda039b), built once; a section's
// "preset" key selects one (a spec's constructor is the preset's Config).
var Presets = sync.OnceValue(func() *registry.Registry[Config] {
	return registry.Must("rollout_correction preset", []registry.Spec[Config]{
		{Name: "decoupled_token_is", New: cfg("token", "", nil, false, "ppo_clip")},
		{Name: "decoupled_token_icepop", New: icePop(false, "ppo_clip")},
		{Name: "bypass_pg_token_icepop", New: icePop(true, "reinforce")},
		{Name: "decoupled_seq_is", New: cfg("sequence", "", nil, false, "ppo_clip")},
		{Name: "decoupled_seq_is_rs", New: cfg("sequence", "seq_sum_k1", "0.5_2.0", false, "ppo_clip")},
		{Name: "decoupled_geo_rs", New: cfg("", "seq_mean_k1", "0.999_1.001", false, "ppo_clip")},
		{Name: "decoupled_geo_rs_seq_tis", New: cfg("sequence", "seq_mean_k1", "0.999_1.001", false, "ppo_clip")},
		{Name: "decoupled_geo_rs_token_tis", New: cfg("token", "seq_mean_k1", "0.999_1.001", false, "ppo_clip")},
		{Name: "decoupled_k3_rs", New: cfg("", "seq_mean_k3", 0.01, false, "ppo_clip")},
		{Name: "decoupled_k3_rs_seq_tis", New: cfg("sequence", "seq_mean_k3", 0.01, false, "ppo_clip")},
		{Name: "decoupled_k3_rs_token_tis", New: cfg("token", "seq_mean_k3", 0.01, false, "ppo_clip")},
		{Name: "bypass_ppo_clip", New: cfg("", "", nil, true, "ppo_clip")},
		{Name: "bypass_ppo_clip_geo_rs", New: cfg("", "seq_mean_k1", "0.999_1.001", true, "ppo_clip")},
		{Name: "bypass_ppo_clip_k3_rs", New: cfg("", "seq_mean_k3", 0.01, true, "ppo_clip")},
		{Name: "bypass_pg_is", New: cfg("sequence", "", nil, true, "reinforce")},
		{Name: "bypass_pg_geo_rs", New: cfg("", "seq_mean_k1", "0.999_1.001", true, "reinforce")},
		{Name: "bypass_pg_geo_rs_seq_tis", New: cfg("sequence", "seq_mean_k1", "0.999_1.001", true, "reinforce")},
		{Name: "bypass_pg_geo_rs_token_tis", New: cfg("token", "seq_mean_k1", "0.999_1.001", true, "reinforce")},
		{Name: "disabled", New: cfg("", "", nil, false, "ppo_clip")},
	}...)
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
		pc, err := Presets().Get(name)
		if err != nil {
			return c, badKey("preset", "%v", err)
		}
		c = pc.New
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
			c.ISThreshold = v
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

// validate checks the IS and loss_type keys as verl does when it uses them
// (the IS threshold only when weights are computed).
func (c Config) validate() error {
	if c.IS != "" && c.IS != "token" && c.IS != "sequence" {
		return badKey("rollout_is", "Invalid rollout_is: %s. Must be one of {'token', 'sequence'}.", c.IS)
	}
	if c.weighted() {
		if _, err := parseISThreshold(c.ISThreshold); err != nil {
			return err
		}
	}
	if c.LossType != "ppo_clip" && c.LossType != "reinforce" {
		return badKey("loss_type", "Invalid loss_type: %s. Must be 'reinforce' or 'ppo_clip'.", c.LossType)
	}
	return nil
}

// isBounds is a parsed rollout_is_threshold: the upper bound U and, for
// IcePop, the lower bound (TIS has none: its metrics take 1/U for it).
type isBounds struct {
	upper, lower float64
	icePop       bool
}

// parseISThreshold is verl's _parse_rollout_is_threshold: a number is the
// TIS cap; a string, blanks stripped, is a number or "lower_upper" split
// at the first "_" (IcePop). The bounds must be positive, lower ≤ upper.
// The messages are verl's.
func parseISThreshold(spec any) (isBounds, error) {
	const key = "rollout_is_threshold"
	var b isBounds
	switch x := spec.(type) {
	case bool:
		return b, badKey(key, "rollout_is_threshold must be specified as a float or a string threshold specification, not a boolean.")
	case float64:
		b.upper = x
	case int:
		b.upper = float64(x)
	case int64:
		b.upper = float64(x)
	case string:
		s := strings.TrimSpace(x)
		if s == "" {
			return b, badKey(key, "rollout_is_threshold must not be an empty string.")
		}
		up := s
		if lo, hi, ok := strings.Cut(s, "_"); ok {
			var good bool
			if b.lower, good = pyFloat(lo); !good {
				return b, badKey(key, "Invalid rollout_is_threshold '%s'.", x)
			}
			b.icePop, up = true, hi
		}
		var good bool
		if b.upper, good = pyFloat(up); !good {
			return b, badKey(key, "Invalid rollout_is_threshold '%s'.", x)
		}
	default:
		return b, badKey(key, "rollout_is_threshold must be a float or a string threshold specification.")
	}
	switch {
	case b.upper <= 0:
		return b, badKey(key, "rollout_is_threshold upper bound must be positive, got %s.", pyRepr(b.upper))
	case b.icePop && b.lower <= 0:
		return b, badKey(key, "rollout_is_threshold lower bound must be positive, got %s.", pyRepr(b.lower))
	case b.icePop && b.lower > b.upper:
		return b, badKey(key, "rollout_is_threshold lower bound must be <= upper bound.")
	}
	return b, nil
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

func boolean(k string, v any) (bool, error) {
	if b, ok := v.(bool); ok {
		return b, nil
	}
	return false, badKey(k, "want true or false, got %v", v)
}

// String is the section in verl's keys, for logs.
func (c Config) String() string {
	or := func(s string) string {
		if s == "" {
			return "null"
		}
		return s
	}
	orNull := func(v any) any {
		if v == nil {
			return "null"
		}
		return v
	}
	return fmt.Sprintf("rollout_is=%s rollout_is_threshold=%v rollout_is_batch_normalize=%v rollout_rs=%s rollout_rs_threshold=%v bypass_mode=%v loss_type=%s",
		or(c.IS), orNull(c.ISThreshold), c.BatchNormalize, or(c.RS), orNull(c.RSThreshold), c.BypassMode, c.LossType)
}
