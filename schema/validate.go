package schema

import (
	"math"
	"slices"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
)

// ValidateOptions selects which row checks Validate applies.
type ValidateOptions struct {
	// AllowInvalidReward accepts null, NaN and ±Inf rewards (a stage that drops
	// them, like invalid_reward_filter, handles them itself).
	AllowInvalidReward bool
	// RequireReward rejects null rewards (when AllowInvalidReward is false).
	RequireReward bool
}

// responseLists are the per-token columns that must all have the response
// length R of their row.
var responseLists = []string{Logprobs, ActionMask, TokenLevelReward, Advantages, Returns, TeacherLogprobs,
	Logprob, OldLogprob, RefLogprob, Values, Entropy, RolloutISWeights}

// IsResponseList reports whether name is a per-token column of response
// length R.
func IsResponseList(name string) bool { return slices.Contains(responseLists, name) }

// Validate checks the rows of one record batch of file, whose first row is
// row firstRow of the store: non-null ids, equal lengths of the per-token
// lists, len(tokens) = prompt_length + R, finite rewards and logprobs. The
// error names file, row and column of the first problem.
func Validate(file string, firstRow int64, rec arrow.Record, opt ValidateOptions) error {
	s := rec.Schema()
	// A column is found by its Role: Trinity's and verl's names too.
	col := func(name string) arrow.Array {
		if i := ColumnIndex(s, name); i >= 0 {
			return rec.Column(i)
		}
		return nil
	}
	stored := func(name string) string {
		if i := ColumnIndex(s, name); i >= 0 {
			return s.Field(i).Name
		}
		return name
	}
	for _, id := range []string{Batch, Task, Run, Step} {
		if a := col(id); a != nil && a.NullN() > 0 {
			for i := 0; i < a.Len(); i++ {
				if a.IsNull(i) {
					return Errorf(file, firstRow+int64(i), id, "null id")
				}
			}
		}
	}
	if a, ok := col(Reward).(*array.Float64); ok && !opt.AllowInvalidReward {
		for i := 0; i < a.Len(); i++ {
			switch v := a.Value(i); {
			case a.IsNull(i):
				if opt.RequireReward {
					return Errorf(file, firstRow+int64(i), Reward, "null reward (see --on-invalid-reward)")
				}
			case math.IsNaN(v) || math.IsInf(v, 0):
				return Errorf(file, firstRow+int64(i), Reward, "reward is %v (see --on-invalid-reward)", v)
			}
		}
	}
	// Per-token lists: the first present one fixes R for each row.
	var lists []array.ListLike
	var names []string
	for _, n := range responseLists {
		if l, ok := col(n).(array.ListLike); ok {
			lists = append(lists, l)
			names = append(names, stored(n))
		}
	}
	tokens, _ := col(Tokens).(array.ListLike)
	plen, _ := col(PromptLength).(*array.Int32)
	_, dpo := col(Chosen).(array.ListLike)
	lp, _ := col(Logprobs).(array.ListLike)
	mask, _ := col(ActionMask).(array.ListLike)
	for i := 0; i < int(rec.NumRows()); i++ {
		row := firstRow + int64(i)
		R, ref := int64(-1), ""
		for k, l := range lists {
			if l.IsNull(i) {
				continue
			}
			lo, hi := l.ValueOffsets(i)
			if R < 0 {
				R, ref = hi-lo, names[k]
			} else if hi-lo != R {
				return Errorf(file, row, names[k], "ragged row: %d values but %s has %d", hi-lo, ref, R)
			}
		}
		if tokens != nil && plen != nil && !dpo && R >= 0 && !tokens.IsNull(i) && !plen.IsNull(i) {
			lo, hi := tokens.ValueOffsets(i)
			if p := int64(plen.Value(i)); p < 0 || p > hi-lo {
				return Errorf(file, row, PromptLength, "prompt_length %d outside tokens (%d)", p, hi-lo)
			} else if hi-lo-p != R && !(hi-lo-p == 1 && R == 1) {
				// (prompt-truncated multi-turn rows keep one dummy response token)
				return Errorf(file, row, Tokens, "%d response tokens but %s has %d", hi-lo-p, ref, R)
			}
		}
		if lp != nil && !lp.IsNull(i) {
			if err := finiteUnderMask(file, row, stored(Logprobs), lp, mask, i); err != nil {
				return err
			}
		}
	}
	return nil
}

// finiteUnderMask rejects NaN or +Inf log-probs (the column name) at
// positions that are trained on (positions with action_mask 0 are ignored, as upstream's masked sums do).
func finiteUnderMask(file string, row int64, name string, lp, mask array.ListLike, i int) error {
	vals, ok := lp.ListValues().(*array.Float32)
	if !ok {
		return nil
	}
	lo, hi := lp.ValueOffsets(i)
	var mv *array.Boolean
	var mlo int64
	if mask != nil && !mask.IsNull(i) {
		mv, _ = mask.ListValues().(*array.Boolean)
		mlo, _ = mask.ValueOffsets(i)
	}
	for k, x := range vals.Float32Values()[lo:hi] {
		if x <= math.MaxFloat32 { // finite or -Inf
			continue
		}
		if mv != nil && !mv.Value(int(mlo)+k) {
			continue
		}
		return Errorf(file, row, name, "log-prob %v at token %d", float64(x), k)
	}
	return nil
}
