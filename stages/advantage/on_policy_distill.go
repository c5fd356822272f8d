package advantage

import (
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
)

// OnPolicyDistill is the trainer-side on_policy_distill fn: advantages =
// kl_coef · (teacher_logprobs − old_log_probs) · mask.
type OnPolicyDistill struct{ KLCoef float64 }

func onPolicyDistillSpec() Spec {
	return Spec{
		Name:   "on_policy_distill",
		Doc:    "reverse-KL distillation advantage from teacher log-probs",
		Params: args.Schema{param("kl_coef", args.Float, 1.0, "scale of the advantage")},
		New:    TrainerCtor(func(a args.Values) (TrainerFn, error) { return &OnPolicyDistill{KLCoef: a.Float("kl_coef")}, nil }),
	}
}

// Compute implements TrainerFn; needs Mask, OldLogprobs, TeacherLogprobs.
// Metrics: kl/mean, kl/std (over rows of Σ_t (old − teacher)·mask),
// advantages/mean (over rows of Σ_t advantages).
func (f *OnPolicyDistill) Compute(b *TokenBatch) (*TokenResult, error) {
	return distillWhole(b, "on_policy_distill", "kl", f.token)
}

// Inputs implements TrainerFn.
func (f *OnPolicyDistill) Inputs() []string { return []string{InOldLogprobs, InTeacherLogprobs} }

// Stream implements TrainerFn: rows are independent.
func (f *OnPolicyDistill) Stream() Streamed { return distillStream("on_policy_distill", "kl", f.token) }

func (f *OnPolicyDistill) token(old, teacher float64) (float64, float64) {
	return old - teacher, f.KLCoef * (teacher - old)
}

// distillWhole runs a per-token distillation rule over a whole batch.
func distillWhole(b *TokenBatch, fn, metric string, tok func(old, teacher float64) (div, adv float64)) (*TokenResult, error) {
	res, rows, err := distill(b, fn, tok)
	if err != nil {
		return nil, err
	}
	res.Metrics = distillMetrics(metric, rows)
	return res, nil
}

// distillStream is the streamed form of a distillation rule.
func distillStream(fn, metric string, tok func(old, teacher float64) (div, adv float64)) Streamed {
	return &localStream{
		compute: func(c *Chunk) (*TokenResult, []rowValues, error) { return distill(&c.TokenBatch, fn, tok) },
		finish:  func(rows []rowValues) agg.Metrics { return distillMetrics(metric, rows) },
	}
}

// distillMetrics returns <metric>/mean, <metric>/std and advantages/mean
// from the per-row sums of the divergence and the advantages.
func distillMetrics(metric string, rows []rowValues) agg.Metrics {
	if len(rows) < 2 {
		rows = []rowValues{nil, nil}
	}
	mean, std := rowStats(rows[0])
	advMean, _ := rowStats(rows[1])
	return agg.Metrics{metric + "/mean": mean, metric + "/std": std, "advantages/mean": advMean}
}

// distill runs a per-token distillation rule: tok(old, teacher) returns the
// token's divergence value and its advantage; both are masked. It returns
// the per-row sums of both.
func distill(b *TokenBatch, fn string, tok func(old, teacher float64) (div, adv float64)) (*TokenResult, []rowValues, error) {
	if err := b.needMask(fn); err != nil {
		return nil, nil, err
	}
	if err := b.need(fn, InOldLogprobs, b.OldLogprobs); err != nil {
		return nil, nil, err
	}
	if err := b.need(fn, InTeacherLogprobs, b.TeacherLogprobs); err != nil {
		return nil, nil, err
	}
	adv := make([]float64, len(b.Mask))
	divSum := make([]float64, b.Rows.N())
	advSum := make([]float64, b.Rows.N())
	for r := range divSum {
		lo, hi := b.Rows.Span(r)
		for t := lo; t < hi; t++ {
			if b.Mask[t] == 0 {
				continue // chunked semantics: 0 at masked positions
			}
			d, a := tok(b.OldLogprobs[t], b.TeacherLogprobs[t])
			d, a = d*b.Mask[t], a*b.Mask[t]
			adv[t] = a
			divSum[r] += d
			advSum[r] += a
		}
	}
	res := &TokenResult{Advantages: adv, Returns: adv, Metrics: agg.Metrics{}}
	return res, []rowValues{divSum, advSum}, nil
}
