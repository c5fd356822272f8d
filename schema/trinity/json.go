package trinity

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// JSON text of plain values, both ways. The store keeps info, metrics and
// the message lists as compact JSON text (UTF-8 as is); the dpo and sft
// tables' JSON columns hold Python's json.dumps text (", " and ": "
// separators, non-ASCII escaped). Floats are written as Python's repr writes
// them, so an integral float keeps its ".0" and reads back as a float; NaN
// and ±Infinity are the bare words Python writes.

// appendJSON appends v as JSON text; python selects json.dumps' default style.
func appendJSON(dst []byte, v any, python bool) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		return strconv.AppendBool(dst, x), nil
	case int64:
		return strconv.AppendInt(dst, x, 10), nil
	case *big.Int:
		return x.Append(dst, 10), nil
	case float64:
		return appendPyFloat(dst, x), nil
	case string:
		return appendJSONString(dst, x, python), nil
	case *List:
		return appendJSONArray(dst, x.Items, python)
	case Tuple:
		return appendJSONArray(dst, x, python)
	case *Dict:
		dst = append(dst, '{')
		for i, k := range x.Keys {
			if i > 0 {
				dst = append(dst, ',')
				if python {
					dst = append(dst, ' ')
				}
			}
			s, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("dict key %v (%T) has no JSON form", k, k)
			}
			dst = appendJSONString(dst, s, python)
			dst = append(dst, ':')
			if python {
				dst = append(dst, ' ')
			}
			var err error
			if dst, err = appendJSON(dst, x.Vals[i], python); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	}
	return nil, fmt.Errorf("%T has no JSON form", v)
}

func appendJSONArray(dst []byte, items []any, python bool) ([]byte, error) {
	dst = append(dst, '[')
	for i, it := range items {
		if i > 0 {
			dst = append(dst, ',')
			if python {
				dst = append(dst, ' ')
			}
		}
		var err error
		if dst, err = appendJSON(dst, it, python); err != nil {
			return nil, err
		}
	}
	return append(dst, ']'), nil
}

// appendPyFloat writes a float as Python's repr: shortest round-trip digits,
// positional between 1e-4 and 1e16, a ".0" on integral values.
func appendPyFloat(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	}
	abs := math.Abs(f)
	if abs != 0 && (abs < 1e-4 || abs >= 1e16) {
		return strconv.AppendFloat(dst, f, 'e', -1, 64)
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, 'f', -1, 64)
	if !strings.ContainsRune(string(dst[start:]), '.') {
		dst = append(dst, ".0"...)
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// appendJSONString quotes s; python escapes every non-printable-ASCII
// character as \uXXXX (UTF-16), as json.dumps does by default.
func appendJSONString(dst []byte, s string, python bool) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c == '\b':
				dst = append(dst, '\\', 'b')
			case c == '\f':
				dst = append(dst, '\\', 'f')
			case c < 0x20 || (python && c == 0x7f):
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if python || r == utf8.RuneError && n == 1 {
			if r1, r2 := utf16.EncodeRune(r); r1 != utf8.RuneError {
				dst = appendU(dst, r1)
				dst = appendU(dst, r2)
			} else {
				dst = appendU(dst, r)
			}
		} else {
			dst = append(dst, s[i:i+n]...)
		}
		i += n
	}
	return append(dst, '"')
}

func appendU(dst []byte, r rune) []byte {
	return append(dst, '\\', 'u', hexDigits[r>>12&15], hexDigits[r>>8&15], hexDigits[r>>4&15], hexDigits[r&15])
}

// parseJSON parses JSON text into plain values: objects become *Dict (in
// order), arrays *List, integers int64 (*big.Int beyond), numbers with a
// fraction or exponent float64, and the bare words NaN, Infinity and
// -Infinity floats.
func parseJSON(s string) (any, error) {
	p := jsonParser{s: s}
	p.space()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i != len(p.s) {
		return nil, p.errf("unexpected text after the value")
	}
	return v, nil
}

type jsonParser struct {
	s string
	i int
}

func (p *jsonParser) errf(format string, args ...any) error {
	return fmt.Errorf("JSON at byte %d: %s", p.i, fmt.Sprintf(format, args...))
}

func (p *jsonParser) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n' || p.s[p.i] == '\r') {
		p.i++
	}
}

func (p *jsonParser) word(w string) bool {
	if strings.HasPrefix(p.s[p.i:], w) {
		p.i += len(w)
		return true
	}
	return false
}

func (p *jsonParser) value(depth int) (any, error) {
	if depth > maxDepth {
		return nil, p.errf("nested too deeply")
	}
	if p.i >= len(p.s) {
		return nil, p.errf("unexpected end")
	}
	switch c := p.s[p.i]; {
	case c == '{':
		p.i++
		d := &Dict{}
		err := p.members("an object key", func(k string) error {
			v, err := p.value(depth + 1)
			if err != nil {
				return err
			}
			d.Set(k, v)
			return nil
		})
		if err != nil {
			return nil, err
		}
		return d, nil
	case c == '[':
		p.i++
		l := &List{}
		err := p.elements(func() error {
			v, err := p.value(depth + 1)
			if err != nil {
				return err
			}
			l.Items = append(l.Items, v)
			return nil
		})
		if err != nil {
			return nil, err
		}
		return l, nil
	case c == '"':
		return p.str()
	case p.word("null"):
		return nil, nil
	case p.word("true"):
		return true, nil
	case p.word("false"):
		return false, nil
	case p.word("NaN"):
		return math.NaN(), nil
	case p.word("Infinity"):
		return math.Inf(1), nil
	case p.word("-Infinity"):
		return math.Inf(-1), nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	return nil, p.errf("unexpected character %q", p.s[p.i])
}

// members parses the members of an object whose '{' p has just read: for
// each, its key (a string, else the error "want " + key) and ':', then
// member(key) with p at the value; members are separated by ',' and the
// object ends at '}'.
func (p *jsonParser) members(key string, member func(k string) error) error {
	p.space()
	if p.word("}") {
		return nil
	}
	for {
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return p.errf("want %s", key)
		}
		k, err := p.str()
		if err != nil {
			return err
		}
		p.space()
		if !p.word(":") {
			return p.errf("want ':'")
		}
		p.space()
		if err := member(k); err != nil {
			return err
		}
		p.space()
		if p.word("}") {
			return nil
		}
		if !p.word(",") {
			return p.errf("want ',' or '}'")
		}
	}
}

// elements parses the elements of an array whose '[' p has just read,
// calling element with p at each; elements are separated by ',' and the
// array ends at ']'.
func (p *jsonParser) elements(element func() error) error {
	p.space()
	if p.word("]") {
		return nil
	}
	for {
		p.space()
		if err := element(); err != nil {
			return err
		}
		p.space()
		if p.word("]") {
			return nil
		}
		if !p.word(",") {
			return p.errf("want ',' or ']'")
		}
	}
}

func (p *jsonParser) number() (any, error) {
	start := p.i
	isFloat := false
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == '.' || c == 'e' || c == 'E' {
			isFloat = true
		} else if !(c >= '0' && c <= '9' || c == '-' || c == '+') {
			break
		}
		p.i++
	}
	t := p.s[start:p.i]
	if isFloat {
		f, err := strconv.ParseFloat(t, 64)
		if err != nil && !isRangeErr(err) {
			return nil, p.errf("bad number %q", t)
		}
		return f, nil
	}
	if n, err := strconv.ParseInt(t, 10, 64); err == nil {
		return n, nil
	}
	b, ok := new(big.Int).SetString(t, 10)
	if !ok {
		return nil, p.errf("bad number %q", t)
	}
	return b, nil
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

func (p *jsonParser) str() (string, error) {
	p.i++ // opening quote
	// Fast path: no escapes.
	for k := p.i; k < len(p.s) && p.s[k] != '\\'; k++ {
		if p.s[k] == '"' {
			s := p.s[p.i:k]
			p.i = k + 1
			return s, nil
		}
	}
	var b strings.Builder
	for {
		if p.i >= len(p.s) {
			return "", p.errf("unterminated string")
		}
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return b.String(), nil
		case c == '\\':
			if p.i+1 >= len(p.s) {
				return "", p.errf("unterminated string")
			}
			e := p.s[p.i+1]
			p.i += 2
			switch e {
			case '"', '\\', '/':
				b.WriteByte(e)
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'u':
				r, err := p.hex4()
				if err != nil {
					return "", err
				}
				if utf16.IsSurrogate(r) {
					// A pair is one character; a lone surrogate is refused
					// (WriteRune would make it U+FFFD).
					esc := p.i - 6
					r2 := utf8.RuneError
					if strings.HasPrefix(p.s[p.i:], `\u`) {
						p.i += 2
						if r2, err = p.hex4(); err != nil {
							return "", err
						}
					}
					if r = utf16.DecodeRune(r, r2); r == utf8.RuneError {
						p.i = esc
						return "", p.errf("%s: a lone UTF-16 surrogate, which text outputs cannot hold", p.s[esc:esc+6])
					}
				}
				b.WriteRune(r)
			default:
				return "", p.errf("bad escape \\%c", e)
			}
		default:
			b.WriteByte(c)
			p.i++
		}
	}
}

func (p *jsonParser) hex4() (rune, error) {
	if p.i+4 > len(p.s) {
		return 0, p.errf("bad \\u escape")
	}
	n, err := strconv.ParseUint(p.s[p.i:p.i+4], 16, 16)
	if err != nil {
		return 0, p.errf("bad \\u escape")
	}
	p.i += 4
	return rune(n), nil
}
