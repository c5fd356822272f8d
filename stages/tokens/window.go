package tokens

import (
	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/agg"
)

// Totals describe a whole batch that is evaluated in windows of rows (a
// store streamed record batch by record batch): what every aggregation mode
// needs besides a row's own values. Indexed by RowSet.
type Totals struct {
	Rows     [3]int     // rows of AllRows, UsualRows, ExpertRows
	Mask     [3]float64 // Σ m over those rows
	NonEmpty [3]int     // those rows with Σ m > 0
	Width    int        // the padded length T: the longest row of the batch
	// Expert says whether the batch has an expert_mask (the row sets
	// UsualRows and ExpertRows are defined).
	Expert bool
}

// TotalsOf returns the totals of b's own rows.
func TotalsOf(b *Batch) Totals {
	t := Totals{Width: b.Rows.Width, Expert: b.expert != nil}
	for r := 0; r < b.Rows.N(); r++ {
		c := b.RowCount(r)
		sets := []RowSet{AllRows}
		if b.expert != nil {
			sets = append(sets, UsualRows)
			if b.expert[r] {
				sets[1] = ExpertRows
			}
		}
		for _, s := range sets {
			t.Rows[s]++
			t.Mask[s] += c
			if c > 0 {
				t.NonEmpty[s]++
			}
		}
	}
	return t
}

// Add folds the totals of the next window into t.
func (t *Totals) Add(u Totals) {
	for i := range t.Rows {
		t.Rows[i] += u.Rows[i]
		t.Mask[i] += u.Mask[i]
		t.NonEmpty[i] += u.NonEmpty[i]
	}
	t.Width = max(t.Width, u.Width)
	t.Expert = t.Expert || u.Expert
}

// SetWindow marks b as rows [first, first+N) of a larger batch with totals
// t: terms are then aggregated over the whole batch (their Stats come from
// t), and kernels see batch row indices (Row.Index = first + r). Sums of the
// windows, added in window order, equal the sums of the whole batch.
func (b *Batch) SetWindow(first int, t Totals) error {
	if b.Rows.Width > t.Width || b.Rows.N() > t.Rows[AllRows] {
		return schema.BadInputf("window of %d rows (width %d) exceeds its batch (%d rows, width %d)", b.Rows.N(), b.Rows.Width, t.Rows[AllRows], t.Width)
	}
	b.first, b.totals = first, &t
	return nil
}

// Totals returns the totals of the batch b belongs to: those of SetWindow,
// else b's own.
func (b *Batch) Totals() Totals {
	if b.totals != nil {
		return *b.totals
	}
	return TotalsOf(b)
}

// First returns the batch row index of b's first row (0 unless windowed).
func (b *Batch) First() int { return b.first }

// Slice returns rows [lo, hi) of b as a batch of their own, sharing b's
// values (per-token inputs, expert_mask, step). It is not windowed: call
// SetWindow to evaluate it as part of b.
func (b *Batch) Slice(lo, hi int) *Batch {
	t0, t1 := b.Rows.Off[lo], b.Rows.Off[hi]
	lens := make([]int, hi-lo)
	for r := lo; r < hi; r++ {
		lens[r-lo] = b.Rows.Off[r+1] - b.Rows.Off[r]
	}
	s := New(agg.NewRows(lens))
	for _, name := range tokenInputs {
		if v := b.cols[name]; v != nil {
			_ = s.Set(name, v[t0:t1:t1]) // lengths match by construction
		}
		if v := b.cols32[name]; v != nil {
			_ = s.Set32(name, v[t0:t1:t1])
		}
	}
	if b.expert != nil {
		s.expert = b.expert[lo:hi:hi]
	}
	if b.step != nil {
		s.step = b.step[lo:hi:hi]
	}
	return s
}
