package synth

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/apache/arrow/go/v17/arrow/array"

	"github.com/rftpipe/rftpipe/schema"
)

// TrainerColumns are the columns Config.With can add: what a trainer holds
// next to a rollout (current, old and reference log-probs, critic values,
// entropy, the expert flag of a mix batch) and a distillation teacher's
// log-probs. They are drawn around the rollout's log-probs:
//
//   - old_logprob: the trainer's recomputation of the rollout policy, the
//     rollout `logprobs` plus small noise (σ 0.01), as rollout correction
//     sees it;
//   - logprob: the current policy, old_logprob moved a little further
//     (σ 0.02), so importance ratios are near but not at 1; in a pairs
//     store, chosen answers gain and rejected ones lose log-probability
//     against the reference, so a DPO margin is positive;
//   - ref_logprob: the reference model, the rollout log-probs plus σ 0.05;
//   - teacher_logprobs: a more confident teacher, closer to 0;
//   - values: a critic's per-token values around 0.5;
//   - entropy: per-token entropy, larger where the token was unlikely;
//   - expert_mask: a quarter of the rows flagged as expert rows;
//   - advantages: a stand-in for an advantage function's output, the row's
//     reward centred at 0.5 on every token of the action mask (0 in a pairs
//     store), so the policy losses run on the store as generated.
//
// Log-probs stay ≤ 0 and entropy ≥ 0; tokens outside the action mask hold 0
// (as workflows write the rollout log-probs of tool tokens).
var TrainerColumns = []string{
	schema.Advantages, schema.Logprob, schema.OldLogprob, schema.RefLogprob, schema.Values,
	schema.Entropy, schema.TeacherLogprobs, schema.ExpertMask,
}

// ParseWith parses a --with list: column names of TrainerColumns separated
// by commas, or "all"; "" is none. The result is in canonical column order.
func ParseWith(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	if s == "all" {
		return canonical(TrainerColumns), nil
	}
	var out []string
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if !slices.Contains(TrainerColumns, name) {
			return nil, schema.BadInputf("--with: unknown column %q (valid: all, %s)", name, strings.Join(TrainerColumns, ", "))
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return canonical(out), nil
}

// canonical sorts column names in schema.Order.
func canonical(names []string) []string {
	out := slices.Clone(names)
	slices.SortFunc(out, func(a, b string) int {
		return slices.Index(schema.Order, a) - slices.Index(schema.Order, b)
	})
	return out
}

// extraRow appends one row of the With columns to fs (one builder per
// column, in c.With order) from the row's rollout log-probs and action mask;
// chosen is +1 for a pairs store's chosen row, -1 for a rejected one, 0
// otherwise; reward is the row's reward (0 in a pairs store). Draws come from rng, apart from the base columns' generator,
// so adding columns leaves the others' bytes unchanged.
func (c Config) extraRow(fs []array.Builder, rng *rand.Rand, lps []float32, mask []bool, chosen, reward float64) {
	if len(c.With) == 0 {
		return
	}
	n := len(lps)
	old := make([]float32, n)
	for t, lp := range lps {
		if mask[t] {
			old[t] = logprob(float64(lp) + 0.01*rng.NormFloat64())
		}
	}
	for k, name := range c.With {
		if name == schema.ExpertMask {
			fs[k].(*array.BooleanBuilder).Append(rng.Float64() < 0.25)
			continue
		}
		vals := make([]float32, n)
		for t := range vals {
			if !mask[t] {
				continue
			}
			lp := float64(lps[t])
			switch name {
			case schema.Advantages:
				if chosen == 0 {
					vals[t] = float32(reward - 0.5)
				}
			case schema.OldLogprob:
				vals[t] = old[t]
			case schema.Logprob:
				shift := 0.02 * rng.NormFloat64()
				if chosen != 0 {
					shift = chosen * (0.02 + 0.03*rng.Float64())
				}
				vals[t] = logprob(float64(old[t]) + shift)
			case schema.RefLogprob:
				vals[t] = logprob(lp + 0.05*rng.NormFloat64())
			case schema.TeacherLogprobs:
				vals[t] = logprob(0.6*lp + 0.05*rng.NormFloat64())
			case schema.Values:
				vals[t] = float32(0.5 + 0.25*rng.NormFloat64())
			case schema.Entropy:
				vals[t] = float32(0.1 - lp + 0.2*rng.Float64())
			}
		}
		appendList(fs[k], vals)
	}
}

// logprob clamps x to a log-probability (≤ 0), as float32.
func logprob(x float64) float32 { return float32(math.Min(x, 0)) }
