package agg

import "github.com/rftpipe/rftpipe/schema"

// MicroBatch is one micro-batch of a mini-batch: per-token loss values and
// mask laid out by Rows, evaluated on data-parallel rank Rank.
type MicroBatch struct {
	Rank int
	Rows Rows
	Loss []float64
	Mask []float64
}

// Composition is how the micro-batch losses of one optimiser step add up
// (verl's engine workers): each micro-batch loss is back-propagated as is,
// gradients are summed over a rank's micro-batches and averaged over the D
// ranks, so the effective objective is Σ_r RankSums[r] / D.
type Composition struct {
	MicroLosses []float64   // the value each micro-batch back-propagates
	RankSums    []float64   // Σ of MicroLosses per rank (index = rank)
	Objective   float64     // Σ RankSums / D
	Grad        [][]float64 // ∂Objective/∂Loss per micro-batch (its flat layout)
}

// ComposeEngine is verl's new-engine path: every micro-batch is aggregated
// with the same global denominators g (g.DPSize ranks). With g's
// BatchNumTokens and GlobalBatchSize set to the mini-batch's values the
// objective equals the loss of the whole mini-batch whatever the split
// (sum-norm: with LossScaleFactor set): the pieces sum to the whole.
func ComposeEngine(mbs []MicroBatch, mode Mode, g Global) (Composition, error) {
	d := g.dp()
	for i, mb := range mbs {
		if mb.Rank < 0 || float64(mb.Rank) >= d {
			return Composition{}, schema.BadInputf("micro-batch %d: rank %d outside 0..%d", i, mb.Rank, int(d)-1)
		}
		if len(mb.Loss) != mb.Rows.Tokens() || len(mb.Mask) != mb.Rows.Tokens() {
			return Composition{}, schema.BadInputf("micro-batch %d: %d loss values and %d mask values for %d tokens", i, len(mb.Loss), len(mb.Mask), mb.Rows.Tokens())
		}
	}
	c := Composition{RankSums: make([]float64, int(d))}
	for _, mb := range mbs {
		grad := make([]float64, mb.Rows.Tokens())
		v, err := g.Loss(mb.Rows, mb.Loss, mb.Mask, mode, grad)
		if err != nil {
			return Composition{}, err
		}
		for i := range grad {
			grad[i] /= d
		}
		c.MicroLosses = append(c.MicroLosses, v)
		c.RankSums[mb.Rank] += v
		c.Grad = append(c.Grad, grad)
	}
	for _, s := range c.RankSums {
		c.Objective += s
	}
	c.Objective /= d
	return c, nil
}
