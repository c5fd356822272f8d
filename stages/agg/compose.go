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
// (verl, spec §7.3/§7.4): each micro-batch loss is back-propagated as is,
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
	return compose(mbs, g.dp(), func(mb MicroBatch, grad []float64) float64 {
		return g.Loss(mb.Rows, mb.Loss, mb.Mask, mode, grad)
	})
}

// Legacy describes verl's legacy dp_actor scaling: local denominators per
// micro-batch, each loss multiplied by 1/GA with GA = MiniBatchSize /
// MicroBatchSizePerGPU (integer division), or, with DynamicBatchSize, by
// rows_mb / MiniBatchSize. Sizes are per rank.
type Legacy struct {
	DPSize               int
	MiniBatchSize        int
	MicroBatchSizePerGPU int
	DynamicBatchSize     bool
}

// ComposeLegacy is verl's legacy-worker path (spec §7.4): token-mean
// becomes the mean of micro-batch token means, not the global token mean.
func ComposeLegacy(mbs []MicroBatch, mode Mode, l Legacy) (Composition, error) {
	if l.MiniBatchSize <= 0 || (!l.DynamicBatchSize && l.MicroBatchSizePerGPU <= 0) {
		return Composition{}, schema.BadInputf("legacy composition: ppo_mini_batch_size and ppo_micro_batch_size_per_gpu must be positive")
	}
	ga := 0
	if !l.DynamicBatchSize {
		if ga = l.MiniBatchSize / l.MicroBatchSizePerGPU; ga == 0 {
			return Composition{}, schema.BadInputf("legacy composition: ppo_micro_batch_size_per_gpu %d exceeds ppo_mini_batch_size %d", l.MicroBatchSizePerGPU, l.MiniBatchSize)
		}
	}
	local := Global{}
	d := Global{DPSize: l.DPSize}.dp()
	return compose(mbs, d, func(mb MicroBatch, grad []float64) float64 {
		s := 1 / float64(ga)
		if l.DynamicBatchSize {
			s = float64(mb.Rows.N()) / float64(l.MiniBatchSize)
		}
		v := local.Loss(mb.Rows, mb.Loss, mb.Mask, mode, grad)
		for i := range grad {
			grad[i] *= s
		}
		return v * s
	})
}

// compose evaluates every micro-batch with loss (which writes its gradient)
// and assembles the composition over d ranks.
func compose(mbs []MicroBatch, d float64, loss func(MicroBatch, []float64) float64) (Composition, error) {
	var c Composition
	for i, mb := range mbs {
		if mb.Rank < 0 || float64(mb.Rank) >= d {
			return Composition{}, schema.BadInputf("micro-batch %d: rank %d outside 0..%d", i, mb.Rank, int(d)-1)
		}
		if len(mb.Loss) != mb.Rows.Tokens() || len(mb.Mask) != mb.Rows.Tokens() {
			return Composition{}, schema.BadInputf("micro-batch %d: %d loss values and %d mask values for %d tokens", i, len(mb.Loss), len(mb.Mask), mb.Rows.Tokens())
		}
	}
	c.RankSums = make([]float64, int(d))
	for _, mb := range mbs {
		grad := make([]float64, mb.Rows.Tokens())
		v := loss(mb, grad)
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
