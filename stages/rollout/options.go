package rollout

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/registry"
)

// Statistic is the per-token divergence a rejection option measures, from
// the clamped log ratio ℓ = clamp(old − rollout, −20, 20).
type Statistic int

// The three statistics.
const (
	K1 Statistic = 1 + iota // −ℓ = log(rollout/old)
	K2                      // ½ℓ²
	K3                      // exp(ℓ) − 1 − ℓ
)

// Level is where an option decides: per token, or per row from the row's
// sum, mean or max of the statistic over valid tokens.
type Level int

// The four levels.
const (
	Token Level = iota
	SeqSum
	SeqMean
	SeqMax
)

// Option is one rejection-sampling option of verl's rollout_rs.
type Option struct {
	Name  string
	Stat  Statistic
	Level Level
}

// Options returns the registry of verl's eleven rollout_rs options
// (rollout_corr_helper.py), built once: token_k{1,2,3}, seq_sum_k{1,2,3},
// seq_mean_k{1,2,3}, seq_max_k{2,3}. They take no arguments; a spec's
// constructor is the option a rule is parsed into.
var Options = sync.OnceValue(func() *registry.Registry[Option] {
	var specs []registry.Spec[Option]
	for _, l := range []struct {
		prefix string
		level  Level
		stats  []Statistic
	}{{"token", Token, []Statistic{K1, K2, K3}}, {"seq_sum", SeqSum, []Statistic{K1, K2, K3}},
		{"seq_mean", SeqMean, []Statistic{K1, K2, K3}}, {"seq_max", SeqMax, []Statistic{K2, K3}}} {
		for _, s := range l.stats {
			name := fmt.Sprintf("%s_k%d", l.prefix, s)
			specs = append(specs, registry.Spec[Option]{Name: name, New: Option{Name: name, Stat: s, Level: l.level}})
		}
	}
	return registry.Must("rollout_rs option", specs...)
})

// rule is a parsed option with its bounds: keep iff Lo ≤ s ≤ Hi for k1
// (log-space bounds), s ≤ Hi for k2/k3. Lo is also the lower clamp of the
// _std metric (0 for k2/k3).
type rule struct {
	Option
	Lo, Hi float64
}

// parseRules parses rollout_rs and rollout_rs_threshold as verl does
// (_parse_rollout_rs_thresholds): duplicates dropped, one threshold shared
// or one per de-duplicated option. ratioBounds is the RC-01 fix: k1 bounds
// "lo_hi" keep old/rollout ∈ [lo, hi] instead of rollout/old.
func parseRules(rs string, threshold any, ratioBounds bool) ([]rule, error) {
	var opts []Option
	seen := map[string]bool{}
	for _, item := range strings.Split(rs, ",") {
		item = strings.TrimSpace(item)
		if item == "" || seen[item] {
			continue
		}
		o, err := Options().Get(item)
		if err != nil {
			quoted := make([]string, 0, len(Options().Names()))
			for _, n := range Options().Names() {
				quoted = append(quoted, "'"+n+"'")
			}
			return nil, badKey("rollout_rs", "Invalid rollout_rs option: %s. Must be one of [%s].", item, strings.Join(quoted, ", "))
		}
		seen[item] = true
		opts = append(opts, o.New)
	}
	if len(opts) == 0 {
		return nil, badKey("rollout_rs", "rollout_rs must contain at least one valid option.")
	}
	var specs []string
	switch t := threshold.(type) {
	case nil:
		return nil, badKey("rollout_rs_threshold", "rollout_rs_threshold must be explicitly provided when rollout_rs is enabled. Set rollout_rs_threshold to the desired threshold value.")
	case float64:
		specs = []string{pyRepr(t)}
	case int:
		specs = []string{strconv.Itoa(t)}
	case int64:
		specs = []string{strconv.FormatInt(t, 10)}
	case string:
		for _, s := range strings.Split(t, ",") {
			if s = strings.TrimSpace(s); s != "" {
				specs = append(specs, s)
			}
		}
		if len(specs) == 0 {
			return nil, badKey("rollout_rs_threshold", "rollout_rs_threshold must contain at least one threshold value.")
		}
	default:
		return nil, badKey("rollout_rs_threshold", "rollout_rs_threshold must be a number or a string, got %T.", threshold)
	}
	if len(specs) != 1 && len(specs) != len(opts) {
		return nil, badKey("rollout_rs_threshold", "rollout_rs_threshold expects either one threshold shared by all options or exactly %d thresholds to match the provided rollout_rs options.", len(opts))
	}
	rules := make([]rule, len(opts))
	for i, o := range opts {
		spec := specs[0]
		if len(specs) > 1 {
			spec = specs[i]
		}
		r, err := parseBounds(o, spec, ratioBounds)
		if err != nil {
			return nil, err
		}
		rules[i] = r
	}
	return rules, nil
}

// parseBounds parses one option's threshold spec.
func parseBounds(o Option, spec string, ratioBounds bool) (rule, error) {
	num := func(s string) (float64, error) {
		x, ok := pyFloat(s)
		if !ok {
			return 0, badKey("rollout_rs_threshold", "Invalid numeric threshold '%s' for option '%s'.", spec, o.Name)
		}
		return x, nil
	}
	r := rule{Option: o}
	if o.Stat != K1 {
		if strings.Contains(spec, "_") {
			return r, badKey("rollout_rs_threshold", "rollout_rs_threshold for option '%s' must provide a single upper bound without '_'. Received '%s'.", o.Name, spec)
		}
		hi, err := num(spec)
		if err != nil {
			return r, err
		}
		if !(hi > 0) {
			return r, badKey("rollout_rs_threshold", "Threshold for option '%s' must be positive, got %s.", o.Name, spec)
		}
		r.Hi = hi
		return r, nil
	}
	var lo, hi float64
	var err error
	if l, h, ok := strings.Cut(spec, "_"); ok {
		if lo, err = num(l); err != nil {
			return r, err
		}
		if hi, err = num(h); err != nil {
			return r, err
		}
	} else {
		if hi, err = num(spec); err != nil {
			return r, err
		}
		lo = 1 / hi
	}
	if !(lo > 0 && hi > 0) {
		return r, badKey("rollout_rs_threshold", "Thresholds for option '%s' must be positive, got %s.", o.Name, spec)
	}
	if lo > hi {
		return r, badKey("rollout_rs_threshold", "Thresholds for option '%s' must be lower <= upper, got %s.", o.Name, spec)
	}
	r.Lo, r.Hi = math.Log(lo), math.Log(hi)
	if ratioBounds {
		r.Lo, r.Hi = -math.Log(hi), -math.Log(lo)
	}
	return r, nil
}

// pyFloat parses a number as Python's float() does (surrounding blanks
// allowed, "inf" and "nan" too, out of range is ±inf or 0).
func pyFloat(s string) (float64, bool) {
	x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	return x, err == nil || errors.Is(err, strconv.ErrRange)
}

// pyRepr formats a float as Python's repr does for the values thresholds
// take (2.0 → "2.0", 0.02 → "0.02").
func pyRepr(x float64) string {
	s := strconv.FormatFloat(x, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEn") {
		s += ".0"
	}
	return s
}

// badKey is a configuration error naming the key.
func badKey(key, format string, a ...any) error {
	return schema.BadInputf("rollout_correction.%s: %s", key, fmt.Sprintf(format, a...))
}
