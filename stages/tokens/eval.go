package tokens

import (
	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/parallel"
)

// RowSet selects the rows a term covers.
type RowSet int

// Row sets. UsualRows and ExpertRows split the batch by expert_mask.
const (
	AllRows RowSet = iota
	UsualRows
	ExpertRows
)

func (s RowSet) has(expert []bool, r int) bool {
	switch s {
	case UsualRows:
		return !expert[r]
	case ExpertRows:
		return expert[r]
	}
	return true
}

// Row is the view of one row a kernel evaluates. Per-token slices are nil
// when the batch lacks the input.
type Row struct {
	Index                                             int // row index in the batch
	LP, Old, Ref, Adv, Mask, Teacher, Entropy, Values []float64
	// Weights are the rollout_is_weights of the row (nil when absent).
	Weights []float64
	// Count is the row's mask count Σ_t m.
	Count float64
	// Scale is the weight c of a masked token value in the term's aggregate:
	// the kernel adds c·Σ_t m·L_t to its first sum.
	Scale float64
	// GradScale is Scale times the term's coefficient: the kernel writes
	// Grad[t] = GradScale · m_t · ∂L_t/∂x_t (0 where m_t = 0).
	GradScale float64
	// Grad is the row's slice of the gradient output.
	Grad []float64
}

// Kernel is the per-token math of one aggregated term. The CPU
// implementation is Row; the kernel's parameters are its exported fields,
// so another backend can implement the same math for the same kernel type.
type Kernel interface {
	// Sums is the number of sums the kernel accumulates per evaluation.
	Sums() int
	// Row evaluates one row and adds its contributions to sums (which holds
	// Sums() values): by convention sums[0] += Scale·Σ_t m·L_t, the others are
	// kernel-specific (metric numerators, row statistics).
	Row(r *Row, sums []float64)
}

// Term is one aggregated per-token sum: a kernel over a set of rows,
// aggregated with Mode; Coef multiplies the gradient (not the sums).
type Term struct {
	Kernel Kernel
	Rows   RowSet
	Mode   agg.Mode
	Coef   float64
	// Global, when set, aggregates with verl's agg_loss and these global
	// denominators (agg.Global) instead of Trinity's aggregate_loss.
	Global *agg.Global
}

// Stats describes the rows a term covered, for turning sums into means.
type Stats struct {
	Rows int // number of rows B of the term
	// NonEmpty is the number of those rows with a non-zero mask count.
	NonEmpty int
	Total    float64 // Σ m over those rows
	Width    int     // padded length T of the batch
}

// MaskedMean returns sum / (Total + 1e-8): upstream's masked_mean over the
// term's rows, given the masked sum.
func (s Stats) MaskedMean(sum float64) float64 { return sum / (s.Total + agg.Eps) }

// TermResult is what Eval returns for one term.
type TermResult struct {
	Sums  []float64
	Stats Stats
}

// Eval evaluates terms over the batch in one pass: each row goes to the
// first term whose RowSet holds it (terms should select disjoint rows); the
// gradient of rows no term covers is set to 0. grad (length Rows.Tokens())
// receives every kernel's gradient. Rows are processed in parallel over
// fixed chunks and the sums reduced in chunk order, so the result does not
// depend on GOMAXPROCS.
func (b *Batch) Eval(grad []float64, terms ...Term) ([]TermResult, error) {
	lay, err := b.Layout(terms)
	if err != nil {
		return nil, err
	}
	if len(grad) != b.Rows.Tokens() {
		return nil, schema.BadInputf("gradient buffer has %d tokens, the batch has %d", len(grad), b.Rows.Tokens())
	}
	res := make([]TermResult, len(terms))
	offs := make([]int, len(terms)+1)
	for i, t := range terms {
		res[i].Stats = lay.Stats[i]
		offs[i+1] = offs[i] + t.Kernel.Sums()
	}
	nsum := offs[len(terms)]
	nchunk := len(b.chunks) - 1
	partial := make([]float64, nchunk*nsum)
	run := func(c int) {
		var row Row
		p := partial[c*nsum : (c+1)*nsum]
		for r := b.chunks[c]; r < b.chunks[c+1]; r++ {
			lo, hi := b.Rows.Span(r)
			ti := lay.Term[r]
			if ti < 0 {
				clear(grad[lo:hi])
				continue
			}
			t := terms[ti]
			b.view(&row, r, lo, hi)
			row.Scale, row.GradScale = b.RowScale(t, lay.Stats[ti], r)
			row.Grad = grad[lo:hi]
			t.Kernel.Row(&row, p[offs[ti]:offs[ti+1]])
		}
	}
	parallel.For(nchunk, run)
	for i := range terms {
		s := make([]float64, offs[i+1]-offs[i])
		for c := 0; c < nchunk; c++ {
			for j := range s {
				s[j] += partial[c*nsum+offs[i]+j]
			}
		}
		res[i].Sums = s
	}
	return res, nil
}

// view points row at row r's slices.
func (b *Batch) view(row *Row, r, lo, hi int) {
	sl := func(name string) []float64 {
		if c := b.cols[name]; c != nil {
			return c[lo:hi:hi]
		}
		return nil
	}
	row.Index = b.first + r
	row.LP, row.Old, row.Ref, row.Adv = sl(LogProb), sl(OldLogProb), sl(RefLogProb), sl(Advantages)
	row.Mask, row.Teacher, row.Entropy, row.Values = sl(ActionMask), sl(TeacherLogProb), sl(Entropy), sl(Values)
	row.Weights = sl(RolloutISWeights)
	row.Count = b.counts[r]
}
