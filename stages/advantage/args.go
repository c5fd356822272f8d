package advantage

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Kind is the type of an arg.
type Kind int

// Arg kinds.
const (
	// Float is a number.
	Float Kind = iota
	// OptFloat is a number or null (Python None).
	OptFloat
	// OptInt is an integer or null.
	OptInt
	// Bool is true or false.
	Bool
	// Enum is one string of Param.Choices.
	Enum
)

// Param declares one arg of a fn: its name, kind, default (the upstream
// default_args() value; nil for null) and, for an Enum, the valid values.
type Param struct {
	Name    string
	Kind    Kind
	Default any
	Choices []string
	Doc     string
}

// Args are resolved args: every declared param has a value of its kind
// (float64, bool, string, or nil for a null OptFloat/OptInt).
type Args map[string]any

// Float returns a Float arg.
func (a Args) Float(name string) float64 { return a[name].(float64) }

// OptFloat returns an OptFloat arg and whether it is set (non-null).
func (a Args) OptFloat(name string) (float64, bool) {
	v, ok := a[name].(float64)
	return v, ok
}

// Bool returns a Bool arg.
func (a Args) Bool(name string) bool { return a[name].(bool) }

// String returns an Enum arg.
func (a Args) String(name string) string { return a[name].(string) }

// Singleton returns the singleton_group_policy arg.
func (a Args) Singleton() SingletonPolicy {
	for i, n := range singletonNames {
		if n == a[paramSingleton.Name] {
			return SingletonPolicy(i)
		}
	}
	return SingletonUpstream
}

// Resolve checks user args against params and fills in the defaults. A user
// value may be typed (float64, int, bool, string, nil, as decoded from JSON)
// or a string as given on a command line ("0.1", "true", "null"). Unknown
// names and bad values are errors wrapping schema.ErrBadInput that list what
// is valid.
func Resolve(fn string, params []Param, user map[string]any) (Args, error) {
	out := Args{}
	for _, p := range params {
		out[p.Name] = p.Default
	}
	names := make([]string, 0, len(user))
	for k := range user {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		p, ok := findParam(params, k)
		if !ok {
			valid := make([]string, len(params))
			for i, q := range params {
				valid[i] = q.Name
			}
			if len(valid) == 0 {
				return nil, errorf(fn, "unknown arg %q (it takes no args)", k)
			}
			return nil, errorf(fn, "unknown arg %q (valid: %s)", k, strings.Join(valid, ", "))
		}
		v, err := convert(p, user[k])
		if err != nil {
			return nil, errorf(fn, "arg %s: %v", k, err)
		}
		out[k] = v
	}
	return out, nil
}

func findParam(params []Param, name string) (Param, bool) {
	for _, p := range params {
		if p.Name == name {
			return p, true
		}
	}
	return Param{}, false
}

// convert turns a user value into the param's kind.
func convert(p Param, v any) (any, error) {
	if s, ok := v.(string); ok && p.Kind != Enum {
		switch strings.ToLower(s) {
		case "null", "none", "":
			v = nil
		case "true", "false":
			v = strings.ToLower(s) == "true"
		default:
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return nil, fmt.Errorf("%q is not a %s", s, kindName(p.Kind))
			}
			v = f
		}
	}
	if i, ok := v.(int); ok {
		v = float64(i)
	}
	switch p.Kind {
	case Float, OptFloat, OptInt:
		if v == nil && p.Kind != Float {
			return nil, nil
		}
		f, ok := v.(float64)
		if !ok || math.IsNaN(f) {
			return nil, fmt.Errorf("%v is not a %s", v, kindName(p.Kind))
		}
		if p.Kind == OptInt && f != math.Trunc(f) {
			return nil, fmt.Errorf("%v is not an integer", v)
		}
		return f, nil
	case Bool:
		b, ok := v.(bool)
		if !ok {
			return nil, fmt.Errorf("%v is not a boolean (true|false)", v)
		}
		return b, nil
	default:
		if v == nil && slices.Contains(p.Choices, "none") {
			return "none", nil // null (Python None) is the choice "none"
		}
		s, _ := v.(string)
		for _, c := range p.Choices {
			if s == c {
				return s, nil
			}
		}
		return nil, fmt.Errorf("%v is not one of %s", v, strings.Join(p.Choices, "|"))
	}
}

func kindName(k Kind) string {
	return [...]string{"number", "number or null", "integer or null", "boolean", "string"}[k]
}

// Shared params of the group-relative fns.
var (
	paramEpsilon = Param{Name: "epsilon", Kind: Float, Default: 1e-6, Doc: "added to the std in the denominator"}
	paramStdCal  = Param{Name: "std_cal_level", Kind: Enum, Default: "group", Choices: []string{"group", "batch"},
		Doc: "std of the group, or of the whole batch"}
	paramStdThreshold = Param{Name: "std_threshold", Kind: OptFloat, Default: nil,
		Doc: "drop groups whose std <= threshold (and singleton groups); null: no filter"}
	paramSingleton = Param{Name: "singleton_group_policy", Kind: Enum, Default: "upstream", Choices: singletonNames,
		Doc: "one-experience groups (Q-02/Q-03): upstream | unit (mean 0, std 1; REC does not fail) | zero (advantage 0) | drop"}
	paramOPMDBaseline = Param{Name: "opmd_baseline", Kind: Enum, Default: "mean", Choices: []string{"mean", "logavgexp"},
		Doc: "group mean, or tau·log-avg-exp(R/tau) (Q-30: other values rejected)"}
	paramTau           = Param{Name: "tau", Kind: Float, Default: 1.0, Doc: "logavgexp temperature"}
	paramBaselineShift = Param{Name: "baseline_shift", Kind: Float, Default: -0.1, Doc: "added to the group mean"}
)
