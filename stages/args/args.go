// Package args declares and resolves the constructor arguments of rftpipe's
// pluggable functions (policy losses, KL and entropy functions), modelling
// upstream's two layers of defaults:
//
//   - default_args(): the dict Trinity's config uses when the user gives none
//     (Schema.Defaults);
//   - constructor defaults: what a key the user's dict omits falls back to
//     (Param.Ctor). A user dict replaces default_args entirely, it is not merged.
//
// Values are float64, int64, bool, string or nil (Python None).
package args

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/rftpipe/rftpipe/schema"
)

// Kind is the type of an argument.
type Kind int

// Argument kinds.
const (
	Float Kind = iota
	Int
	Bool
	String
	// Floats is a list of numbers ([]float64); on the command line,
	// comma-separated.
	Floats
)

func (k Kind) String() string {
	return [...]string{"float", "int", "bool", "string", "list of floats"}[k]
}

// Param declares one constructor argument.
type Param struct {
	Name string
	Kind Kind
	// Nullable allows nil (Python None).
	Nullable bool
	// Ctor is the constructor default (nil: None, or required when not Nullable).
	Ctor any
	// Default is the default_args() value; used only when InDefaults.
	Default    any
	InDefaults bool
	// Choices, when set, are the valid values of a String argument.
	Choices []string
	// Range is the valid interval of a Float or Int argument, or of each
	// element of a Floats one (the empty Range: every finite number),
	// checked by Resolve.
	Range schema.Range
	// Doc is a one-line description for help texts.
	Doc string
}

// In returns p with its valid range set to r.
func (p Param) In(r schema.Range) Param {
	p.Range = r
	return p
}

// Schema is the ordered list of a function's arguments.
type Schema []Param

// Values is a resolved argument set, name → value.
type Values map[string]any

// Names returns the argument names in declaration order.
func (s Schema) Names() []string {
	out := make([]string, len(s))
	for i, p := range s {
		out[i] = p.Name
	}
	return out
}

func (s Schema) param(name string) (Param, bool) {
	for _, p := range s {
		if p.Name == name {
			return p, true
		}
	}
	return Param{}, false
}

// Defaults returns a copy of the default_args() dict.
func (s Schema) Defaults() Values {
	v := Values{}
	for _, p := range s {
		if p.InDefaults {
			v[p.Name] = p.Default
		}
	}
	return v
}

// Resolve validates a user argument dict and fills the keys it omits with the
// constructor defaults; a nil dict means default_args() (then constructor
// defaults for the rest), as upstream. Unknown names, values of the wrong
// type, numbers outside Range, strings outside Choices and missing required
// arguments are errors wrapping schema.ErrBadInput.
func (s Schema) Resolve(user Values) (Values, error) {
	if user == nil {
		user = s.Defaults()
	}
	var unknown []string
	for k := range user {
		if _, ok := s.param(k); !ok {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, schema.BadInputf("unknown argument %s (valid: %s)", strings.Join(unknown, ", "), strings.Join(s.Names(), ", "))
	}
	out := make(Values, len(s))
	for _, p := range s {
		v, given := user[p.Name]
		if !given {
			v = p.Ctor
		}
		cv, err := p.coerce(v)
		if err != nil {
			return nil, err
		}
		out[p.Name] = cv
	}
	return out, nil
}

// coerce checks v against the parameter's kind, converting JSON-ish numbers.
func (p Param) coerce(v any) (any, error) {
	if v == nil {
		if p.Nullable {
			return nil, nil
		}
		return nil, schema.BadInputf("argument %s is required (%s)", p.Name, p.Kind)
	}
	bad := func() (any, error) {
		return nil, schema.BadInputf("argument %s: %v is not a valid %s", p.Name, v, p.Kind)
	}
	inRange := func(x float64) error { return p.Range.Check("argument "+p.Name, x) }
	switch p.Kind {
	case Float:
		var f float64
		switch x := v.(type) {
		case float64:
			f = x
		case int64:
			f = float64(x)
		case int:
			f = float64(x)
		default:
			return bad()
		}
		return f, inRange(f)
	case Int:
		var i int64
		switch x := v.(type) {
		case int64:
			i = x
		case int:
			i = int64(x)
		case float64:
			if x != math.Trunc(x) || math.Abs(x) >= 1<<53 {
				return bad()
			}
			i = int64(x)
		default:
			return bad()
		}
		return i, inRange(float64(i))
	case Bool:
		if x, ok := v.(bool); ok {
			return x, nil
		}
	case Floats:
		xs, err := coerceFloats(p, v)
		if err != nil {
			return nil, err
		}
		for i, x := range xs {
			if err := p.Range.Check(fmt.Sprintf("argument %s: element %d", p.Name, i), x); err != nil {
				return nil, err
			}
		}
		return xs, nil
	case String:
		x, ok := v.(string)
		if !ok {
			return bad()
		}
		if len(p.Choices) > 0 && !contains(p.Choices, x) {
			return nil, schema.BadInputf("argument %s: invalid value %q (valid: %s)", p.Name, x, strings.Join(p.Choices, ", "))
		}
		return x, nil
	}
	return bad()
}

// coerceFloats converts a list argument (JSON array or []float64).
func coerceFloats(p Param, v any) ([]float64, error) {
	switch x := v.(type) {
	case []float64:
		return x, nil
	case []any:
		out := make([]float64, len(x))
		for i, e := range x {
			switch n := e.(type) {
			case json.Number:
				f, err := n.Float64()
				if err != nil {
					return nil, schema.BadInputf("argument %s: element %d: %v", p.Name, i, err)
				}
				out[i] = f
			case float64:
				out[i] = n
			case int64:
				out[i] = float64(n)
			case int:
				out[i] = float64(n)
			default:
				return nil, schema.BadInputf("argument %s: element %d (%v) is not a number", p.Name, i, e)
			}
		}
		return out, nil
	}
	return nil, schema.BadInputf("argument %s: %v is not a valid %s", p.Name, v, p.Kind)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ParseKV parses "name=value" strings (command-line --arg flags) using each
// argument's kind; "null" or "none" gives nil, except where "none" is one
// of a string argument's choices (rec's clip_mode=none). Unknown names are
// errors.
func (s Schema) ParseKV(kvs []string) (Values, error) {
	out := Values{}
	for _, kv := range kvs {
		name, raw, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, schema.BadInputf("argument %q: want name=value", kv)
		}
		p, known := s.param(name)
		if !known {
			return nil, schema.BadInputf("unknown argument %s (valid: %s)", name, strings.Join(s.Names(), ", "))
		}
		if l := strings.ToLower(raw); (l == "null" || l == "none") && !(p.Kind == String && contains(p.Choices, raw)) {
			out[name] = nil
			continue
		}
		var v any
		var err error
		switch p.Kind {
		case Float:
			var f float64
			f, err = strconv.ParseFloat(raw, 64)
			if err == nil && math.IsNaN(f) {
				return nil, schema.BadInputf("argument %s: NaN is not a value (null is None)", name)
			}
			v = f
		case Int:
			v, err = strconv.ParseInt(raw, 10, 64)
		case Bool:
			v, err = strconv.ParseBool(raw)
		case Floats:
			fs := []float64{}
			for _, part := range strings.Split(raw, ",") {
				var f float64
				if f, err = strconv.ParseFloat(strings.TrimSpace(part), 64); err != nil {
					break
				}
				fs = append(fs, f)
			}
			v = fs
		default:
			v = raw
		}
		if err != nil {
			return nil, schema.BadInputf("argument %s: %q is not a valid %s", name, raw, p.Kind)
		}
		out[name] = v
	}
	return out, nil
}

// FromJSON decodes a JSON object of arguments (as in the golden files and
// config files): numbers become float64 or int64, null becomes nil.
func FromJSON(raw map[string]json.RawMessage) (Values, error) {
	out := make(Values, len(raw))
	for k, r := range raw {
		var v any
		d := json.NewDecoder(strings.NewReader(string(r)))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			return nil, schema.BadInputf("argument %s: %v", k, err)
		}
		if n, ok := v.(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				v = i
			} else if f, err := n.Float64(); err == nil {
				v = f
			} else {
				return nil, schema.BadInputf("argument %s: %v", k, err)
			}
		}
		out[k] = v
	}
	return out, nil
}

// Overlay returns a copy of base with every key of over set.
func Overlay(base, over Values) Values {
	out := make(Values, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

// Float returns a resolved Float argument (0 if nil).
func (v Values) Float(name string) float64 { x, _ := v[name].(float64); return x }

// OptFloat returns a resolved nullable Float argument and whether it is set.
func (v Values) OptFloat(name string) (float64, bool) { x, ok := v[name].(float64); return x, ok }

// Int returns a resolved Int argument (0 if nil).
func (v Values) Int(name string) int64 { x, _ := v[name].(int64); return x }

// Bool returns a resolved Bool argument (false if nil).
func (v Values) Bool(name string) bool { x, _ := v[name].(bool); return x }

// Floats returns a resolved Floats argument (nil if nil).
func (v Values) Floats(name string) []float64 { x, _ := v[name].([]float64); return x }

// String returns a resolved String argument ("" if nil).
func (v Values) String(name string) string { x, _ := v[name].(string); return x }
