package schema

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Range is the valid interval of a numeric argument or flag in interval
// notation: "[0,1]", "(0,inf)", "[1,inf)", "[0,inf]" (the infinite bound
// itself allowed), or a union of intervals joined by "∪", such as
// "(-inf,-1)∪(-1,inf)" (every finite number but -1). The empty Range is
// "(-inf,inf)": every finite number. NaN is never in a range.
type Range string

// Ranges used by several declarations.
const (
	Finite   Range = ""
	Positive Range = "(0,inf)"
	NonNeg   Range = "[0,inf)"
	Unit     Range = "[0,1]"
	AtLeast1 Range = "[1,inf)"
	NonZero  Range = "(-inf,0)∪(0,inf)"
)

// union separates the intervals of a Range.
const union = "∪"

// bounds is a parsed Range.
type bounds struct {
	lo, hi         float64
	loOpen, hiOpen bool
}

// intervals reads the intervals of the range; a malformed one is an error
// (a declaration bug, or bad input where the range comes from the user).
func (r Range) intervals() ([]bounds, error) {
	if r == Finite {
		b, err := r.parse()
		return []bounds{b}, err
	}
	var out []bounds
	for _, part := range strings.Split(string(r), union) {
		if part == "" {
			return nil, fmt.Errorf("range %q has an empty part", string(r))
		}
		b, err := Range(part).parse()
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// contains reports whether x lies in the interval.
func (b bounds) contains(x float64) bool {
	return !(x < b.lo || (b.loOpen && x == b.lo) || x > b.hi || (b.hiOpen && x == b.hi))
}

// parse reads one interval; a malformed one is an error.
func (r Range) parse() (bounds, error) {
	if r == Finite {
		return bounds{math.Inf(-1), math.Inf(1), true, true}, nil
	}
	s := string(r)
	if len(s) < 5 || (s[0] != '[' && s[0] != '(') || (s[len(s)-1] != ']' && s[len(s)-1] != ')') {
		return bounds{}, fmt.Errorf("range %q: want [lo,hi], (lo,hi), [lo,hi) or (lo,hi]", s)
	}
	lo, hi, ok := strings.Cut(s[1:len(s)-1], ",")
	if !ok {
		return bounds{}, fmt.Errorf("range %q: want lo,hi", s)
	}
	b := bounds{loOpen: s[0] == '(', hiOpen: s[len(s)-1] == ')'}
	var err error
	if b.lo, err = strconv.ParseFloat(strings.TrimSpace(lo), 64); err != nil || math.IsNaN(b.lo) {
		return bounds{}, fmt.Errorf("range %q: bad lower bound %q", s, lo)
	}
	if b.hi, err = strconv.ParseFloat(strings.TrimSpace(hi), 64); err != nil || math.IsNaN(b.hi) {
		return bounds{}, fmt.Errorf("range %q: bad upper bound %q", s, hi)
	}
	if b.lo > b.hi || (b.lo == b.hi && (b.loOpen || b.hiOpen)) {
		return bounds{}, fmt.Errorf("range %q is empty", s)
	}
	return b, nil
}

// Contains reports whether x lies in the range. A malformed range contains
// nothing.
func (r Range) Contains(x float64) bool {
	bs, err := r.intervals()
	if err != nil || math.IsNaN(x) {
		return false
	}
	for _, b := range bs {
		if b.contains(x) {
			return true
		}
	}
	return false
}

// Valid returns an error when the range is malformed.
func (r Range) Valid() error {
	_, err := r.intervals()
	return err
}

// String is the interval as help texts print it.
func (r Range) String() string {
	if r == Finite {
		return "(-inf,inf)"
	}
	return string(r)
}

// Check returns a bad-input error naming what (an argument or a flag) when x
// is outside the range.
func (r Range) Check(what string, x float64) error {
	if r.Contains(x) {
		return nil
	}
	return BadInputf("%s: %v is outside its valid range %s", what, x, r)
}
