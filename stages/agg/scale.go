package agg

import "math"

// Scale returns the factor c with which a masked token value of a row enters
// Aggregate under mode, so that aggregate(v) = Σ_rows c_row · Σ_t v·m. rows is
// the number of rows B being aggregated, width the padded length T, total the
// mask count of all rows and rowCount the mask count of the row itself:
//
//	token-mean               c = 1 / (total + 1e-8)
//	seq-mean-token-sum       c = 1 / B
//	seq-mean-token-mean      c = 1 / (B · (rowCount + 1e-8))
//	seq-mean-token-sum-norm  c = 1 / (T + 1e-8)
//	token-sum                c = 1
//
// A per-token gradient of the aggregate is c·m; Weights is that, written out.
func Scale(mode Mode, rows, width int, total, rowCount float64) float64 {
	switch mode {
	case TokenMean:
		return 1 / (total + Eps)
	case TokenSum:
		return 1
	case SeqMeanTokenSum:
		return 1 / float64(rows)
	case SeqMeanTokenMean:
		return 1 / (float64(rows) * (rowCount + Eps))
	default:
		return 1 / (float64(width) + Eps)
	}
}

// Total turns Σ_rows c_row · Σ_t v·m (accumulated with Scale) into the
// aggregate: the seq-mean modes average over rows, so with zero rows the
// aggregate is NaN as upstream's mean over an empty tensor; otherwise sum is
// returned unchanged.
func Total(mode Mode, rows int, sum float64) float64 {
	if rows == 0 && (mode == SeqMeanTokenSum || mode == SeqMeanTokenMean) {
		return math.NaN()
	}
	return sum
}
