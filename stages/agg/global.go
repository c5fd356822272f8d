package agg

import "github.com/rftpipe/rftpipe/schema"

// Global is verl's global_batch_info: the denominators of a loss computed in
// pieces (micro-batches on data-parallel ranks) so that the pieces sum to the
// loss of the whole mini-batch (verl's agg_loss, core_algos.py). A zero
// field is absent and takes the local value of the micro-batch being
// aggregated:
//
//	field            absent (0) means
//	DPSize           1
//	BatchNumTokens   Σ m of the micro-batch (no epsilon: an empty one gives NaN)
//	GlobalBatchSize  the micro-batch's non-empty rows (none: NaN)
//	LossScaleFactor  the micro-batch's padded width T
//
// verl's formulas (row_b = Σ_t L·m, n_b = Σ_t m, D, Ntok, G, F the fields):
//
//	token-mean               Σ_b row_b / Ntok · D
//	seq-mean-token-sum       Σ_{n_b>0} row_b / G · D
//	seq-mean-token-mean      Σ_{n_b>0} row_b / (n_b + 1e-8) / G · D
//	seq-mean-token-sum-norm  Σ_{n_b>0} row_b / G · D / F
//
// They differ from Trinity's aggregate_loss (Aggregate) even with every
// field absent: token-mean has no epsilon and the seq-mean modes divide by
// the non-empty rows, not all rows.
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

// dp returns D.
func (g Global) dp() float64 {
	if g.DPSize == 0 {
		return 1
	}
	return float64(g.DPSize)
}

// Scale returns the factor c with which a masked token value of a row enters
// the aggregate under mode (aggregate = Σ_rows c_row · Σ_t L·m; the gradient
// of a valid token is c·m): nonEmpty is the number of rows with a non-zero
// mask count in the aggregated micro-batch, width its padded length T, total
// its mask count and rowCount the row's own mask count.
func (g Global) Scale(mode Mode, nonEmpty, width int, total, rowCount float64) float64 {
	d := g.dp()
	rows := g.GlobalBatchSize
	if rows == 0 {
		rows = float64(nonEmpty)
	}
	switch mode {
	case TokenMean:
		n := g.BatchNumTokens
		if n == 0 {
			n = total
		}
		return d / n
	case SeqMeanTokenSum:
		return d / rows
	case SeqMeanTokenMean:
		return d / (rows * (rowCount + Eps))
	default:
		f := g.LossScaleFactor
		if f == 0 {
			f = float64(width)
		}
		return d / rows / f
	}
}

// Loss is verl's agg_loss(L, m, mode, **g) of one micro-batch laid out by r
// (r.Width is T_mb), evaluated in verl's order of operations. Inside a row
// L·m is a plain product, so NaN or ±Inf at a masked position of a partly
// valid row poisons the seq-* modes as it does upstream; the seq-mean modes
// select empty rows out, token-mean selects every masked token out. grad,
// when not nil (length r.Tokens()), receives ∂loss/∂L: c·m at the valid
// tokens that count (c from Scale), exactly 0 elsewhere.
func (g Global) Loss(r Rows, v, m []float64, mode Mode, grad []float64) float64 {
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
	var loss float64
	switch mode {
	case TokenMean:
		n := g.BatchNumTokens
		if n == 0 {
			n = total
		}
		loss = Sum(v, m) / n * d
	default:
		s := 0.0
		for b, rc := range counts {
			lo, hi := r.Span(b)
			row := 0.0
			for i := lo; i < hi; i++ {
				row += v[i] * m[i]
			}
			switch {
			case rc == 0: // selected out
			case mode == SeqMeanTokenSum || mode == SeqMeanTokenSumNorm:
				s += row
			default:
				s += row / (rc + Eps)
			}
		}
		rows := g.GlobalBatchSize
		if rows == 0 {
			rows = float64(nonEmpty)
		}
		loss = s / rows * d
		if mode == SeqMeanTokenSumNorm {
			f := g.LossScaleFactor
			if f == 0 {
				f = float64(r.Width)
			}
			loss /= f
		}
	}
	if grad != nil {
		for b, rc := range counts {
			lo, hi := r.Span(b)
			c := g.Scale(mode, nonEmpty, r.Width, total, rc)
			for i := lo; i < hi; i++ {
				grad[i] = 0
				if m[i] != 0 && (rc != 0 || mode == TokenMean) {
					grad[i] = c * m[i]
				}
			}
		}
	}
	return loss
}
