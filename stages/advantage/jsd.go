package advantage

import (
	"math"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/args"
)

// JSD is the trainer-side jsd fn: a per-token Jensen-Shannon style
// divergence between the student (old_log_probs) and the teacher, advantages
// = −kl_coef · j · mask. Masked positions are 0 whether or not chunk_size is
// set (the chunked semantics, Q-31); chunk_size only bounds upstream's memory.
type JSD struct {
	Lambda, KLCoef, Temperature float64
}

func jsdSpec() Spec {
	return Spec{
		Name: "jsd",
		Doc:  "Jensen-Shannon distillation advantage from teacher log-probs",
		Params: args.Schema{
			param("lambda_coef", args.Float, 0.5, "mixture weight β (0: s − t, 1: t − s)").In(schema.Unit),
			param("kl_coef", args.Float, 1.0, "scale of the advantage"),
			param("temperature", args.Float, 1.0, "divides both log-probs").In(schema.NonZero),
			param("chunk_size", args.Int, nil, "upstream memory chunking, 0 as null; no effect on values").In(schema.NonNeg),
		},
		New: TrainerCtor(func(a args.Values) (TrainerFn, error) {
			return &JSD{Lambda: a.Float("lambda_coef"), KLCoef: a.Float("kl_coef"), Temperature: a.Float("temperature")}, nil
		}),
	}
}

// Compute implements TrainerFn; needs Mask, OldLogprobs, TeacherLogprobs.
// Metrics: jsd/mean, jsd/std (over rows of Σ_t j·mask), advantages/mean.
func (f *JSD) Compute(b *TokenBatch) (*TokenResult, error) {
	return distillWhole(b, "jsd", "jsd", f.token())
}

// Inputs implements TrainerFn.
func (f *JSD) Inputs() []string { return []string{InOldLogprobs, InTeacherLogprobs} }

// Stream implements TrainerFn: rows are independent.
func (f *JSD) Stream() Streamed { return distillStream("jsd", "jsd", f.token()) }

// token returns the per-token rule: the divergence and the advantage.
func (f *JSD) token() func(s, t float64) (float64, float64) {
	beta := f.Lambda
	lnB, ln1B := math.Log(beta), math.Log(1-beta)
	return func(s, t float64) (float64, float64) {
		if f.Temperature != 1 {
			s, t = s/f.Temperature, t/f.Temperature
		}
		var j float64
		switch beta {
		case 0:
			j = s - t
		case 1:
			j = t - s
		default:
			logM := logAddExp(s+ln1B, t+lnB)
			j = beta*(t-logM) + (1-beta)*(s-logM)
		}
		return j, -f.KLCoef * j
	}
}

func logAddExp(a, b float64) float64 {
	if a < b {
		a, b = b, a
	}
	if math.IsInf(a, -1) {
		return a
	}
	return a + math.Log1p(math.Exp(b-a))
}
