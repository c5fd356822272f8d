package advantage

import (
	"math"
	"sort"

	"github.com/rftpipe/rftpipe/stages/args"
)

// ClipV is the trainer-side clipv fn: grpo_verl advantages, then tokens with
// a non-positive advantage whose D = necs − S exceeds mu·std(D) are removed
// from the response mask (S from the old log-probs); when more than max_frac
// of the tokens would go, only the top-k largest D of the negative-advantage
// candidates are removed. Statistics are float32, as upstream.
type ClipV struct{ Epsilon, Mu, MaxFrac float64 }

func clipVSpec() Spec {
	return Spec{
		Name: "clipv",
		Doc:  "grpo_verl advantages plus necs-based clipping of non-positive-advantage tokens",
		Params: args.Schema{paramEpsilon,
			// default_args() says 8.5, the constructor 2.0: both layers are kept.
			{Name: "mu", Kind: args.Float, Ctor: 2.0, Default: 8.5, InDefaults: true, Doc: "clip tokens with D > mu·std(D)"},
			param("max_frac", args.Float, 1e-4, "largest fraction of tokens clipped before top-k")},
		New: TrainerCtor(func(a args.Values) (TrainerFn, error) {
			return &ClipV{Epsilon: a.Float("epsilon"), Mu: a.Float("mu"), MaxFrac: a.Float("max_frac")}, nil
		}),
	}
}

// Inputs implements TrainerFn.
func (f *ClipV) Inputs() []string {
	return []string{InTokenLevelRewards, InGroups, InOldLogprobs, InEntropys, InNecs}
}

// Stream implements TrainerFn: the whole batch is held (a batch-wide top-K
// over its tokens).
func (f *ClipV) Stream() Streamed { return &wholeStream{fn: f} }

// Compute implements TrainerFn; needs Mask, TokenLevelRewards, Groups,
// OldLogprobs, Entropys, Necs. Metrics: frac_clipped, frac_clipped_pos,
// frac_clipped_neg, stdD.
func (f *ClipV) Compute(b *TokenBatch) (*TokenResult, error) {
	const fn = "clipv"
	res, err := clipSetup(b, fn, f.Epsilon, InOldLogprobs, b.OldLogprobs)
	if err != nil {
		return nil, err
	}
	if err := b.need(fn, "necs", b.Necs); err != nil {
		return nil, err
	}
	S := entropySignal(b, b.OldLogprobs)
	D := make([]float32, len(S))
	for i := range D {
		D[i] = float32(b.Necs[i]) - S[i]
	}
	n := maskCount32(b.Mask)
	_, vd := maskedMeanVar32(D, b.Mask, n)
	std := float32(math.Sqrt(float64(vd)))
	keep := make([]bool, len(D))
	for i := range keep {
		keep[i] = true
	}
	A := res.Advantages
	if std >= 1e-12 {
		limit := float32(f.Mu) * std
		clipped := 0
		var cand []int // C: A < 0, masked in, D above the limit
		for i, d := range D {
			keepNeg := d <= limit
			keep[i] = A[i] > 0 || keepNeg
			if b.Mask[i] > 0 && !keep[i] {
				clipped++
			}
			if A[i] < 0 && b.Mask[i] > 0 && !keepNeg {
				cand = append(cand, i)
			}
		}
		// K = max(int(max_frac·n), 1), compared as a float: it may exceed
		// every int when max_frac is large.
		K := max(math.Trunc(f.MaxFrac*float64(n)), 1)
		if float32(clipped)/n > float32(f.MaxFrac) && float64(len(cand)) > K {
			for _, i := range cand {
				keep[i] = true
			}
			sort.SliceStable(cand, func(x, y int) bool { return D[cand[x]] > D[cand[y]] })
			for _, i := range cand[:int(K)] {
				keep[i] = false
			}
		}
	}
	res.Mask = applyKeep(b.Mask, keep)
	res.Metrics = clipFractions(b.Mask, res.Mask, A)
	res.Metrics["stdD"] = float64(std)
	return res, nil
}
