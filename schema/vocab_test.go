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
	want := []InputColumns{
		{"logprob", []string{Logprob, Logprobs}},
		{"old_logprob", []string{OldLogprob, Logprobs}},
		{"ref_logprob", []string{RefLogprob}},
		{"advantages", []string{Advantages}},
		{"action_mask", []string{ActionMask}},
		{"teacher_logprob", []string{TeacherLogprobs}},
		{"entropy", []string{Entropy}},
		{"values", []string{Values}},
		{"expert_mask", []string{ExpertMask}},
		{"rollout_is_weights", []string{RolloutISWeights}},
	}
	if !slices.EqualFunc(Inputs, want, func(a, b InputColumns) bool { return a.Input == b.Input && slices.Equal(a.Columns, b.Columns) }) {
		t.Errorf("Inputs %v, want %v", Inputs, want)
	}
}
