package loss

import (
	"testing"

	"github.com/rftpipe/rftpipe/stages/tokens"
)

// evalInWindows evaluates l over b as the engine streams it: windows of
// rows rows; the stream's statistics passes over every window first, then
// each window set up (Stream.Window), planned and evaluated, its sums added
// up and finished once. It returns the outcome and dLoss/dlogprob.
func evalInWindows(t *testing.T, l *Loss, b *tokens.Batch, rows int) (Outcome, []float64) {
	out, grad, _ := evalInWindowsPasses(t, l, b, rows)
	return out, grad
}

// evalInWindowsPasses is evalInWindows that also returns the number of
// statistics passes the stream took.
func evalInWindowsPasses(t *testing.T, l *Loss, b *tokens.Batch, rows int) (Outcome, []float64, int) {
	t.Helper()
	return evalObserving(t, l, b, b, rows)
}

// evalObserving is evalInWindowsPasses whose statistics passes observe the
// windows of obs (b's rows, its inputs held otherwise).
func evalObserving(t *testing.T, l *Loss, b, obs *tokens.Batch, rows int) (Outcome, []float64, int) {
	t.Helper()
	s, sl := l.Stream()
	var wins [][2]int
	for lo := 0; lo < b.Rows.N(); lo += rows {
		wins = append(wins, [2]int{lo, min(lo+rows, b.Rows.N())})
	}
	tot := tokens.TotalsOf(b)
	window := func(b *tokens.Batch, w [2]int) *tokens.Batch {
		win := b.Slice(w[0], w[1])
		if err := win.SetWindow(w[0], tot); err != nil {
			t.Fatal(err)
		}
		return win
	}
	pass := 0
	for ; pass < s.Passes(); pass++ {
		for _, w := range wins {
			if err := s.Observe(pass, window(obs, w)); err != nil {
				t.Fatal(err)
			}
		}
	}
	grad := make([]float64, b.Rows.Tokens())
	var p *Plan
	var sums []float64
	for _, w := range wins {
		win := window(b, w)
		if err := s.Window(win); err != nil {
			t.Fatal(err)
		}
		if p == nil {
			var err error
			if p, err = sl.Plan(win); err != nil {
				t.Fatal(err)
			}
		}
		lo, _ := b.Rows.Span(w[0])
		_, hi := b.Rows.Span(w[1] - 1)
		res, err := win.Eval(grad[lo:hi], p.Terms...)
		if err != nil {
			t.Fatal(err)
		}
		if sums == nil {
			sums = make([]float64, len(res[0].Sums))
		}
		for i, v := range res[0].Sums {
			sums[i] += v
		}
	}
	out, err := p.Finish([]tokens.TermResult{{Sums: sums, Stats: tokens.Stats{Rows: tot.Rows[0], NonEmpty: tot.NonEmpty[0], Total: tot.Mask[0], Width: tot.Width}}})
	if err != nil {
		t.Fatal(err)
	}
	return out, grad, pass
}
