package agg

import "github.com/rftpipe/rftpipe/schema"

// Global is verl's global_batch_info: the denominators of a loss computed in
// pieces (micro-batches on data-parallel ranks) so that the pieces sum to the
// loss of the whole mini-batch (verl's agg_loss, core_algos.py, as of verl
// 1dda039b). A zero field is absent and takes the local value of the
// micro-batch being aggregated:
//
//	field            absent (0) means
//	DPSize           1
//	BatchNumTokens   Σ m of the micro-batch (no epsilon: an empty one gives NaN)
//	GlobalBatchSize  the micro-batch's non-empty rows (none: NaN)
//	LossScaleFactor  the micro-batch's padded width T
//
// With DPSize > 1 the count a mode divides by must be given (Check).
// verl's formulas (row_b = Σ_t L·m, n_b = Σ_t m, D, Ntok, G, F the fields):
//
//	token-mean               Σ_b row_b / Ntok · D
//	token-sum                Σ_b row_b · D
//	seq-mean-token-sum       Σ_{n_b>0} row_b / G · D
//	seq-mean-token-mean      Σ_{n_b>0} row_b / (n_b + 1e-8) / G · D
//	seq-mean-token-sum-norm  Σ_{n_b>0} row_b / G · D / F
//
// They differ from Trinity's aggregate_loss (Aggregate) even with every
// field absent: token-mean has no epsilon, the seq-mean modes divide by
// the non-empty rows, not all rows, and sum-norm by them too.
type Global struct {
	DPSize          int     // data-parallel world size D
	BatchNumTokens  float64 // mask count of the whole mini-batch over all ranks, Ntok
	GlobalBatchSize float64 // sequences per optimiser step over all ranks, G (verl: ppo_mini_batch_size × rollout.n)
	LossScaleFactor float64 // the sum-norm divisor F (verl: actor.loss_scale_factor)
}

// Validate checks that no field is negative (or NaN); the error names the field.
func (g Global) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"dp_size", float64(g.DPSize)}, {"batch_num_tokens", g.BatchNumTokens},
		{"global_batch_size", g.GlobalBatchSize}, {"loss_scale_factor", g.LossScaleFactor}} {
		if !(f.v >= 0) {
			return schema.BadInputf("%s must be positive, got %v", f.name, f.v)
		}
	}
	return nil
}

// Check is verl's rule that with DPSize > 1 a local count would be wrong:
// token-mean needs BatchNumTokens, the seq-mean modes GlobalBatchSize
// (token-sum needs neither). The errors are verl's.
func (g Global) Check(mode Mode) error {
	if g.DPSize <= 1 {
		return nil
	}
	switch {
	case mode == TokenMean && g.BatchNumTokens == 0:
		return schema.BadInputf("(global) batch_num_tokens is required when dp_size > 1")
	case mode != TokenMean && mode != TokenSum && g.GlobalBatchSize == 0:
		return schema.BadInputf("global_batch_size is required when dp_size > 1")
	}
	return nil
}

// dp returns D.
func (g Global) dp() float64 {
	if g.DPSize == 0 {
		return 1
	}
	return float64(g.DPSize)
}

// rows returns G, the micro-batch's non-empty rows when absent.
func (g Global) rows(nonEmpty int) float64 {
	if g.GlobalBatchSize == 0 {
		return float64(nonEmpty)
	}
	return g.GlobalBatchSize
}

// factor returns F, the micro-batch's padded width when absent.
func (g Global) factor(width int) float64 {
	if g.LossScaleFactor == 0 {
		return float64(width)
	}
	return g.LossScaleFactor
}

// Scale returns the factor c with which a masked token value of a row enters
// the aggregate under mode (aggregate = Σ_rows c_row · Σ_t L·m; the gradient
// of a valid token is c·m): nonEmpty is the number of rows with a non-zero
// mask count in the aggregated micro-batch, width its padded length T, total
// its mask count and rowCount the row's own mask count.
func (g Global) Scale(mode Mode, nonEmpty, width int, total, rowCount float64) float64 {
	d := g.dp()
	switch mode {
	case TokenMean:
		n := g.BatchNumTokens
		if n == 0 {
			n = total
		}
		return d / n
	case TokenSum:
		return d
	case SeqMeanTokenSum:
		return d / g.rows(nonEmpty)
	case SeqMeanTokenMean:
		return d / (g.rows(nonEmpty) * (rowCount + Eps))
	default:
		return d / (g.rows(nonEmpty) * g.factor(width))
	}
}

// Loss is verl's agg_loss(L, m, mode, **g) of one micro-batch laid out by r
// (r.Width is T_mb), evaluated in verl's order of operations; g.Check(mode)
// is its error. Inside a row L·m is a plain product, so NaN or ±Inf at a
// masked position of a partly valid row poisons the seq-* modes as it does
// upstream; the seq-* modes select empty rows out, token-mean and token-sum
// select every masked token out. grad, when not nil (length r.Tokens()),
// receives ∂loss/∂L: c·m at the valid tokens that count (c from Scale),
// exactly 0 elsewhere.
func (g Global) Loss(r Rows, v, m []float64, mode Mode, grad []float64) (float64, error) {
	if err := g.Check(mode); err != nil {
		return 0, err
	}
	total, nonEmpty := 0.0, 0
	counts := make([]float64, r.N())
	for b := range counts {
		lo, hi := r.Span(b)
		counts[b] = Count(m[lo:hi])
		total += counts[b]
		if counts[b] > 0 {
			nonEmpty++
		}
	}
	d := g.dp()
	tokenLevel := mode == TokenMean || mode == TokenSum
	var loss float64
	switch mode {
	case TokenMean:
		n := g.BatchNumTokens
		if n == 0 {
			n = total
		}
		loss = Sum(v, m) / n * d
	case TokenSum:
		loss = Sum(v, m) * d
	default:
		s := 0.0
		for b, rc := range counts {
			if rc == 0 { // selected out
				continue
			}
			lo, hi := r.Span(b)
			row := 0.0
			for i := lo; i < hi; i++ {
				row += v[i] * m[i]
			}
			if mode == SeqMeanTokenMean {
				row /= rc + Eps
			}
			s += row
		}
		loss = s / g.rows(nonEmpty) * d
		if mode == SeqMeanTokenSumNorm {
			loss /= g.factor(r.Width)
		}
	}
	if grad != nil {
		for b, rc := range counts {
			lo, hi := r.Span(b)
			c := g.Scale(mode, nonEmpty, r.Width, total, rc)
			for i := lo; i < hi; i++ {
				grad[i] = 0
				if m[i] != 0 && (rc != 0 || tokenLevel) {
					grad[i] = c * m[i]
				}
			}
		}
	}
	return loss, nil
}
