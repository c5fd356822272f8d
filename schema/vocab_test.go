package schema

import (
	"maps"
	"slices"
	"testing"
)

// TestVocabularyDirections: the one table gives Trinity's and verl's names
// in both directions — a store's column name → the column, an input's name
// → the canonical input — which differ for the teacher log-probs, and the
// columns each input is read from.
func TestVocabularyDirections(t *testing.T) {
	wantAliases := map[string]string{
		"log_prob":          Logprob,
		"old_log_probs":     OldLogprob,
		"old_log_prob":      OldLogprob,
		"ref_log_prob":      RefLogprob,
		"entropys":          Entropy,
		"is_expert":         ExpertMask,
		"response_mask":     ActionMask,
		"rollout_log_probs": Logprobs,
		"teacher_logprob":   TeacherLogprobs,
	}
	if !maps.Equal(Aliases, wantAliases) {
		t.Errorf("Aliases %v, want %v", Aliases, wantAliases)
	}
	for in, want := range map[string]string{
		"log_prob": "logprob", "old_log_probs": "old_logprob", "ref_log_prob": "ref_logprob",
		"response_mask": "action_mask", "entropys": "entropy", "teacher_logprobs": "teacher_logprob",
		// not an input's alias: unchanged
		"teacher_logprob": "teacher_logprob", "old_log_prob": "old_log_prob", "is_expert": "is_expert",
		"logprobs": "logprobs", "rollout_log_probs": "rollout_log_probs", "necs": "necs",
	} {
		if got := InputName(in); got != want {
			t.Errorf("InputName(%q) = %q, want %q", in, got, want)
		}
	}
	if n := len(inputAliases); n != 6 {
		t.Errorf("%d input aliases %v, want 6", n, inputAliases)
	}
	for _, tt := range []struct {
		in     Input
		cols   []string
		verl   string
		perRow bool
	}{
		{InLogprob, []string{Logprob, Logprobs}, "log_prob", false},
		{InOldLogprob, []string{OldLogprob, Logprobs}, "old_log_probs", false},
		{InRefLogprob, []string{RefLogprob}, "ref_log_prob", false},
		{InAdvantages, []string{Advantages}, "advantages", false},
		{InActionMask, []string{ActionMask}, "response_mask", false},
		{InTeacherLogprob, []string{TeacherLogprobs}, "teacher_logprobs", false},
		{InEntropy, []string{Entropy}, "entropys", false},
		{InValues, []string{Values}, "values", false},
		{InExpertMask, []string{ExpertMask}, "expert_mask", true},
		{InRolloutISWeights, []string{RolloutISWeights}, "rollout_is_weights", false},
	} {
		if got := tt.in.Columns(); !slices.Equal(got, tt.cols) {
			t.Errorf("%s.Columns() = %v, want %v", tt.in, got, tt.cols)
		}
		if got := tt.in.Verl(); got != tt.verl {
			t.Errorf("%s.Verl() = %q, want %q", tt.in, got, tt.verl)
		}
		if got := tt.in.PerRow(); got != tt.perRow {
			t.Errorf("%s.PerRow() = %v, want %v", tt.in, got, tt.perRow)
		}
	}
}

// TestInputNames: the names messages and help texts list are every input's,
// in the order they are read, rollout_is_weights included.
func TestInputNames(t *testing.T) {
	want := []string{"logprob", "old_logprob", "ref_logprob", "advantages", "action_mask",
		"teacher_logprob", "entropy", "values", "expert_mask", "rollout_is_weights"}
	if got := InputNames(); !slices.Equal(got, want) {
		t.Errorf("InputNames() = %v, want %v", got, want)
	}
}

// TestParseInput: canonical and verl names are inputs; store-only names and
// others are not.
func TestParseInput(t *testing.T) {
	for _, tt := range []struct {
		name string
		want Input
		ok   bool
	}{
		{"rollout_is_weights", InRolloutISWeights, true},
		{"old_log_probs", InOldLogprob, true},
		{"teacher_logprobs", InTeacherLogprob, true},
		{"expert_mask", InExpertMask, true},
		{"is_expert", "is_expert", false},
		{"logprobs", "logprobs", false},
		{"nosuch", "nosuch", false},
	} {
		if got, ok := ParseInput(tt.name); got != tt.want || ok != tt.ok {
			t.Errorf("ParseInput(%q) = %q, %v, want %q, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}
