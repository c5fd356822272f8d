package view

import (
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
)

// funcs are the templates' formatting functions.
var funcs = template.FuncMap{
	"num":   formatValue,
	"int":   func(v any) string { return formatInt(v) },
	"pct":   formatPct,
	"json":  toJSON,
	"short": shortValue,
	"eq":    func(a, b any) bool { return fmt.Sprint(a) == fmt.Sprint(b) },
	"list":  func(s ...string) []string { return s },
}

// asInt converts a scanned integer to int64 (-1 for NULL or a non-integer).
func asInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case int32:
		return int64(x)
	case int16:
		return int64(x)
	case int8:
		return int64(x)
	case uint64:
		return int64(x)
	case uint32:
		return int64(x)
	case uint8:
		return int64(x)
	}
	return -1
}

// asFloat converts a scanned number or bool to float64 (NaN for NULL).
func asFloat(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case float32:
		return float64(x)
	case bool:
		if x {
			return 1
		}
		return 0
	case int64, int32, int16, int8, uint64, uint32, uint8:
		return float64(asInt(v))
	}
	return math.NaN()
}

// asList returns a scanned list (nil for NULL).
func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// formatValue renders a value for the page: numbers to 4 significant
// digits, NULL as "–", lists by their length.
func formatValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "–"
	case float64:
		return formatFloat(x)
	case float32:
		return formatFloat(float64(x))
	case []any:
		return fmt.Sprintf("[%d values]", len(x))
	}
	return fmt.Sprint(v)
}

func formatFloat(x float64) string {
	switch {
	case math.IsNaN(x):
		return "NaN"
	case x == math.Trunc(x) && math.Abs(x) < 1e15:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return strconv.FormatFloat(x, 'g', 4, 64)
}

// formatInt renders an integer with thousands separators.
func formatInt(v any) string {
	n := asInt(v)
	if v == nil {
		return "–"
	}
	if f, ok := v.(float64); ok {
		n = int64(f)
	}
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// formatPct renders part/whole as a percentage.
func formatPct(part, whole any) string {
	w := asFloat(whole)
	if w == 0 || math.IsNaN(w) {
		return "–"
	}
	return strconv.FormatFloat(100*asFloat(part)/w, 'f', 1, 64) + "%"
}

// shortValue renders a value of any column, long text and lists cut short.
func shortValue(v any) string {
	var s string
	switch x := v.(type) {
	case []any, map[string]any:
		b, err := json.Marshal(x)
		if err != nil {
			return fmt.Sprint(x)
		}
		s = string(b)
	default:
		s = formatValue(v)
	}
	if r := []rune(s); len(r) > 200 {
		return string(r[:200]) + "…"
	}
	return s
}

// toJSON renders the plots' data: records with NaN and infinities as null.
func toJSON(recs []record) template.JS {
	clean := make([]map[string]any, len(recs))
	for i, r := range recs {
		m := make(map[string]any, len(r))
		for k, v := range r {
			if f := asFloat(v); v != nil && (math.IsNaN(f) || math.IsInf(f, 0)) {
				if _, isStr := v.(string); !isStr {
					v = nil
				}
			}
			m[k] = v
		}
		clean[i] = m
	}
	b, err := json.Marshal(clean)
	if err != nil {
		return "[]"
	}
	return template.JS(b)
}
