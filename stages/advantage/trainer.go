package advantage

import (
	"fmt"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/parallel"
)

// TokenBatch is the trainer batch a trainer-side fn reads: ragged [B, T]
// token columns stored flat (row b spans Rows.Span(b)), response-aligned.
// Only the columns a fn needs must be set (each fn documents them). A row
// shorter than the padded width is treated as padded with zeros, so the
// results equal upstream's for rows of equal length.
type TokenBatch struct {
	Rows              agg.Rows
	Mask              []float64 // response_mask (0/1)
	TokenLevelRewards []float64 // after the KL penalty, if any
	Values            []float64 // critic values (ppo)
	OldLogprobs       []float64 // old_log_probs (on_policy_distill, jsd, clipv)
	RolloutLogprobs   []float64 // rollout_log_probs (clipb)
	TeacherLogprobs   []float64 // teacher_logprobs (on_policy_distill, jsd)
	Entropys          []float64 // per-token entropy (clipb, clipv; Q-24)
	Necs              []float64 // the Clip_V signal (clipv; Q-24)
	RewardBaselines   []float64 // per row (remax; Q-26)
	// Groups groups the rows by the uid column (= tid) for the group fns
	// (grpo_verl, rloo, opmd_verl, asymre_verl, clipb, clipv).
	Groups Groups
}

// TokenResult is the output of a trainer-side fn, flat like its batch. Its
// slices are not written after the fn returns; Returns is Advantages itself
// where the two are equal by definition (the outcome-score fns).
type TokenResult struct {
	Advantages []float64
	Returns    []float64
	// Mask is the rewritten response_mask (clipb, clipv); nil otherwise.
	Mask []float64
	// Metrics are the fn's metrics (which upstream's trainer discards, Q-25).
	Metrics agg.Metrics
}

// need checks that column name of b has one value per token.
func (b *TokenBatch) need(fn, name string, col []float64) error {
	if len(col) != b.Rows.Tokens() {
		if col == nil {
			return &MissingColumnError{Fn: fn, Column: name}
		}
		return errorf(fn, "column %s has %d values, the batch has %d tokens", name, len(col), b.Rows.Tokens())
	}
	return nil
}

// MissingColumnError is a column a trainer-side fn needs (a
// TrainerFn.Inputs name, or the mask) and its batch lacks. It is bad input.
type MissingColumnError struct{ Fn, Column string }

// Error renders "advantage fn FN: missing column C".
func (e *MissingColumnError) Error() string {
	return fmt.Sprintf("advantage fn %s: missing column %s", e.Fn, e.Column)
}

// Unwrap makes errors.Is(err, schema.ErrBadInput) true.
func (e *MissingColumnError) Unwrap() error { return schema.ErrBadInput }

// needMask checks the rows and the response mask.
func (b *TokenBatch) needMask(fn string) error {
	if len(b.Rows.Off) == 0 {
		return errorf(fn, "batch has no row offsets")
	}
	return b.need(fn, InResponseMask, b.Mask)
}

// rowSums returns Σ_t x over every position of each row (mask not applied).
func (b *TokenBatch) rowSums(x []float64) []float64 {
	s := make([]float64, b.Rows.N())
	for r := range s {
		lo, hi := b.Rows.Span(r)
		for _, v := range x[lo:hi] {
			s[r] += v
		}
	}
	return s
}

// broadcast returns score[row] × mask for every token, the rows in chunks
// over the cores.
func (b *TokenBatch) broadcast(score []float64) []float64 {
	out := make([]float64, len(b.Mask))
	bounds := b.Rows.Chunks(parallel.SpanSize)
	parallel.For(len(bounds)-1, func(k int) {
		for r := bounds[k]; r < bounds[k+1]; r++ {
			lo, hi := b.Rows.Span(r)
			for t := lo; t < hi; t++ {
				out[t] = score[r] * b.Mask[t]
			}
		}
	})
	return out
}

// groupScores runs a group rule over the rows' summed token rewards
// (s_b = Σ_t token_level_rewards) grouped by uid, and returns the per-row scores.
func (b *TokenBatch) groupScores(fn string, rule groupRule) ([]float64, error) {
	if err := b.needMask(fn); err != nil {
		return nil, err
	}
	if err := b.need(fn, InTokenLevelRewards, b.TokenLevelRewards); err != nil {
		return nil, err
	}
	if err := b.Groups.check("uid", b.Rows.N()); err != nil {
		return nil, errorf(fn, "%v", err)
	}
	score := make([]float64, b.Rows.N())
	out := groupOut[float64]{score: score}
	if err := runGroups(b.Groups, b.rowSums(b.TokenLevelRewards), rule, SingletonUpstream, &out); err != nil {
		return nil, err
	}
	return score, nil
}

// groupResult is the result of the outcome-score group fns: advantages =
// returns = score × mask.
func (b *TokenBatch) groupResult(fn string, rule groupRule) (*TokenResult, error) {
	score, err := b.groupScores(fn, rule)
	if err != nil {
		return nil, err
	}
	adv := b.broadcast(score)
	return &TokenResult{Advantages: adv, Returns: adv, Metrics: agg.Metrics{}}, nil
}

// rowStats returns the mean of x over rows and its unbiased std (0 for <= 1 row).
func rowStats(x []float64) (mean, std float64) {
	if len(x) == 0 {
		return prec64.mean(x), 0
	}
	mean, std = prec64.meanStd(x)
	if len(x) < 2 {
		std = 0
	}
	return mean, std
}

// Set sets the input named in (an In… name) to v.
func (b *TokenBatch) Set(in string, v []float64) {
	switch in {
	case InTokenLevelRewards:
		b.TokenLevelRewards = v
	case InValues:
		b.Values = v
	case InOldLogprobs:
		b.OldLogprobs = v
	case InRolloutLogprobs:
		b.RolloutLogprobs = v
	case InTeacherLogprobs:
		b.TeacherLogprobs = v
	case InEntropys:
		b.Entropys = v
	case InNecs:
		b.Necs = v
	case InRewardBaselines:
		b.RewardBaselines = v
	}
}
