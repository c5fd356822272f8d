// Package agg holds the one implementation of masked reductions (sum, mean,
// variance, whitening), the four loss aggregation modes and metric gathering
// that every loss, KL term, entropy term and advantage function uses.
//
// Token data is ragged: a batch of B rows is stored as flat slices with row
// offsets (Rows); Rows.Width is the padded response length T that upstream's
// tensors would have, which only the seq-mean-token-sum-norm mode reads.
package agg

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Eps is the epsilon upstream adds to every mask count.
const Eps = 1e-8

// Rows describes a ragged [B, T] batch: row b spans Off[b]:Off[b+1] of the flat
// value and mask slices. Width is the padded length T (>= every row's length).
type Rows struct {
	Off   []int
	Width int
}

// NewRows builds Rows from row lengths; Width is the longest length.
func NewRows(lengths []int) Rows {
	off := make([]int, len(lengths)+1)
	w := 0
	for i, n := range lengths {
		off[i+1] = off[i] + n
		if n > w {
			w = n
		}
	}
	return Rows{Off: off, Width: w}
}

// N returns the number of rows B.
func (r Rows) N() int { return len(r.Off) - 1 }

// Tokens returns the total number of stored tokens.
func (r Rows) Tokens() int { return r.Off[len(r.Off)-1] }

// Span returns row b's bounds in the flat slices.
func (r Rows) Span(b int) (lo, hi int) { return r.Off[b], r.Off[b+1] }

// Chunks splits the rows into runs of whole rows of at least n tokens (the
// last run may hold fewer), the units a pass spreads over the cores: the
// runs' row boundaries, from 0 to N() ([0] when there are no rows).
func (r Rows) Chunks(n int) []int {
	bounds := []int{0}
	for b := 0; b < r.N(); b++ {
		if r.Off[b+1]-r.Off[bounds[len(bounds)-1]] >= n || b == r.N()-1 {
			bounds = append(bounds, b+1)
		}
	}
	return bounds
}

// sel is upstream's select-then-multiply: a value under a zero mask is
// replaced by 0 before the product, so NaN/Inf there never leak.
func sel(v, m float64) float64 {
	if m == 0 {
		return 0
	}
	return v * m
}

// Sum returns Σ v·m over all elements (select-then-multiply).
func Sum(v, m []float64) float64 {
	s := 0.0
	for i := range v {
		s += sel(v[i], m[i])
	}
	return s
}

// Count returns Σ m.
func Count(m []float64) float64 {
	s := 0.0
	for _, x := range m {
		s += x
	}
	return s
}

// Mean returns Sum(v,m) / (Count(m) + 1e-8); an empty mask gives 0.
func Mean(v, m []float64) float64 { return Sum(v, m) / (Count(m) + Eps) }

// Errors of masked_var with an unbiased estimate, worded as upstream.
var (
	ErrEmptyMask = errors.New("At least one element in the mask has to be 1.")
	ErrOneMask   = errors.New("The sum of the mask is one, which can cause a division by zero.")
)

// Var returns the masked variance over all elements; unbiased multiplies by
// n/(n-1) and fails for n == 0 or n == 1 as upstream does.
func Var(v, m []float64, unbiased bool) (float64, error) {
	mean := Mean(v, m)
	s := 0.0
	for i := range v {
		d := v[i] - mean
		s += sel(d*d, m[i])
	}
	n := Count(m)
	vr := s / (n + Eps)
	if unbiased {
		switch {
		case n == 0:
			return 0, ErrEmptyMask
		case n == 1:
			return 0, ErrOneMask
		}
		vr = vr * n / (n - 1)
	}
	return vr, nil
}

// Whiten writes (v - mean) / sqrt(var + 1e-8) for every element, masked or
// not (upstream does not re-mask), into dst; shiftMean false adds the mean back.
func Whiten(dst, v, m []float64, shiftMean bool) error {
	mean := Mean(v, m)
	vr, err := Var(v, m, true)
	if err != nil {
		return err
	}
	inv := 1 / math.Sqrt(vr+Eps)
	for i := range v {
		dst[i] = (v[i] - mean) * inv
		if !shiftMean {
			dst[i] += mean
		}
	}
	return nil
}

// Mode is a loss aggregation mode (loss_agg_mode).
type Mode int

// The loss_agg_modes: Trinity's four, and verl's token-sum, which
// Trinity's aggregate_loss lacks (there rftpipe takes the masked sum
// Σ v·m, verl's local value).
const (
	TokenMean Mode = iota
	SeqMeanTokenSum
	SeqMeanTokenMean
	SeqMeanTokenSumNorm
	TokenSum
)

var modeNames = []string{"token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm", "token-sum"}

func (m Mode) String() string { return modeNames[m] }

// ModeNames returns the loss_agg_mode names in Mode order.
func ModeNames() []string { return slices.Clone(modeNames) }

// ParseMode parses a loss_agg_mode name; the error lists the valid names as
// upstream's does.
func ParseMode(s string) (Mode, error) {
	if i := slices.Index(modeNames, s); i >= 0 {
		return Mode(i), nil
	}
	return 0, fmt.Errorf("Invalid loss_agg_mode: %s. Choose from ['%s']", s, strings.Join(modeNames, "', '"))
}

// Weights writes into w, for every token, the derivative of Aggregate with
// respect to that token's value: aggregate(v) = Σ w_i·v_i for every mode, so a
// loss computes its per-token terms once and gets both its value and its
// gradient from these weights. It returns the mask count Σ m.
//
//	token-mean               w = m / (Σm + 1e-8)
//	seq-mean-token-sum       w = m / B
//	seq-mean-token-mean      w = m / (B · (Σ_row m + 1e-8))
//	seq-mean-token-sum-norm  w = m / (T + 1e-8)
//	token-sum                w = m
func Weights(r Rows, m []float64, mode Mode, w []float64) float64 {
	n := Count(m)
	for b := 0; b < r.N(); b++ {
		lo, hi := r.Span(b)
		rc := 0.0
		if mode == SeqMeanTokenMean {
			rc = Count(m[lo:hi])
		}
		c := Scale(mode, r.N(), r.Width, n, rc)
		for i := lo; i < hi; i++ {
			w[i] = m[i] * c
		}
	}
	return n
}

// Aggregate reduces per-token values to a scalar with the given mode. Rows
// with an empty mask contribute 0 and still count in B; B = 0 gives NaN for
// the seq-mean modes, as upstream.
func Aggregate(r Rows, v, m []float64, mode Mode) float64 {
	switch mode {
	case TokenMean:
		return Mean(v, m)
	case TokenSum:
		return Sum(v, m)
	case SeqMeanTokenSum, SeqMeanTokenMean:
		B := r.N()
		if B == 0 {
			return math.NaN()
		}
		s := 0.0
		for b := 0; b < B; b++ {
			lo, hi := r.Span(b)
			if mode == SeqMeanTokenSum {
				s += Sum(v[lo:hi], m[lo:hi])
			} else {
				s += Mean(v[lo:hi], m[lo:hi])
			}
		}
		return s / float64(B)
	default:
		return Sum(v, m) / (float64(r.Width) + Eps)
	}
}
