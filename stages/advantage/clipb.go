package advantage

import (
	"math"

	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
)

// ClipB is the trainer-side clipb fn: grpo_verl advantages, then tokens with
// a negative advantage whose S = exp(LP)·(H + LP) lies more than mu stds below
// the batch mean of S are removed from the response mask. LP are the rollout
// log-probs, H the entropies. Statistics are float32, as upstream.
type ClipB struct{ Epsilon, Mu float64 }

func clipBSpec() Spec {
	return Spec{
		Name: "clipb",
		Doc:  "grpo_verl advantages plus entropy-based clipping of negative-advantage tokens",
		Params: args.Schema{paramEpsilon,
			param("mu", args.Float, 2.5, "clip tokens with S − E[S] < −mu·std(S)")},
		New: TrainerCtor(func(a args.Values) (TrainerFn, error) {
			return &ClipB{Epsilon: a.Float("epsilon"), Mu: a.Float("mu")}, nil
		}),
	}
}

// Compute implements TrainerFn; needs Mask, TokenLevelRewards, Groups,
// RolloutLogprobs, Entropys. Metrics: frac_clipped, frac_clipped_pos,
// frac_clipped_neg, ES, varS.
func (f *ClipB) Compute(b *TokenBatch) (*TokenResult, error) {
	const fn = "clipb"
	res, err := clipSetup(b, fn, f.Epsilon, InRolloutLogprobs, b.RolloutLogprobs)
	if err != nil {
		return nil, err
	}
	S := entropySignal(b, b.RolloutLogprobs)
	n := maskCount32(b.Mask)
	es, vs := maskedMeanVar32(S, b.Mask, n)
	std := float32(math.Sqrt(float64(vs)))
	keep := make([]bool, len(b.Mask))
	for i, a := range res.Advantages {
		keep[i] = std < 1e-12 || a >= 0 || S[i]-es >= -float32(f.Mu)*std
	}
	res.Mask = applyKeep(b.Mask, keep)
	res.Metrics = clipFractions(b.Mask, res.Mask, res.Advantages)
	res.Metrics["ES"], res.Metrics["varS"] = float64(es), float64(vs)
	return res, nil
}

// Inputs implements TrainerFn.
func (f *ClipB) Inputs() []string {
	return []string{InTokenLevelRewards, InGroups, InRolloutLogprobs, InEntropys}
}

// Stream implements TrainerFn: the whole batch is held (batch-wide token
// statistics).
func (f *ClipB) Stream() Streamed { return &wholeStream{fn: f} }

// clipSetup checks the columns of clipb/clipv and computes the grpo_verl
// advantages (returns = advantages).
func clipSetup(b *TokenBatch, fn string, eps float64, lpName string, lp []float64) (*TokenResult, error) {
	if err := b.needMask(fn); err != nil {
		return nil, err
	}
	if err := b.need(fn, lpName, lp); err != nil {
		return nil, err
	}
	if err := b.need(fn, InEntropys, b.Entropys); err != nil {
		return nil, err
	}
	return b.groupResult(fn, (&GRPOVerl{Epsilon: eps}).rule())
}

// entropySignal returns S = exp(LP)·(H + LP) per token, in float32.
func entropySignal(b *TokenBatch, lp []float64) []float32 {
	S := make([]float32, len(lp))
	for i, x := range lp {
		l := float32(x)
		S[i] = float32(math.Exp(float64(l))) * (float32(b.Entropys[i]) + l)
	}
	return S
}

// maskCount32 returns max(Σ mask, 1) in float32.
func maskCount32(mask []float64) float32 {
	return float32(math.Max(agg.Count(mask), 1))
}

// maskedMeanVar32 returns the masked mean and population variance of x over n
// tokens, as float32 (sums in float64).
func maskedMeanVar32(x []float32, mask []float64, n float32) (mean, variance float32) {
	s := 0.0
	for i, v := range x {
		s += float64(v) * mask[i]
	}
	mean = float32(s / float64(n))
	ss := 0.0
	for i, v := range x {
		d := float64(v - mean)
		ss += d * d * mask[i]
	}
	return mean, float32(ss / float64(n))
}

// applyKeep returns mask × keep.
func applyKeep(mask []float64, keep []bool) []float64 {
	out := make([]float64, len(mask))
	for i, m := range mask {
		if keep[i] {
			out[i] = m
		}
	}
	return out
}

// clipFractions returns frac_clipped{,_pos,_neg}: 1 − Σ new / max(Σ old, 1)
// over all tokens, those with A > 0 and those with A < 0, in float32.
func clipFractions(old, new, adv []float64) agg.Metrics {
	var o, n [3]float64 // all, pos, neg
	for i := range old {
		o[0] += old[i]
		n[0] += new[i]
		switch {
		case adv[i] > 0:
			o[1] += old[i]
			n[1] += new[i]
		case adv[i] < 0:
			o[2] += old[i]
			n[2] += new[i]
		}
	}
	frac := func(k int) float64 {
		return float64(1 - float32(n[k])/float32(math.Max(o[k], 1)))
	}
	return agg.Metrics{"frac_clipped": frac(0), "frac_clipped_pos": frac(1), "frac_clipped_neg": frac(2)}
}
