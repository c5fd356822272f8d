package pipeline

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/advantage"
)

// TestColumnHint: a trainer-side fn's missing values or teacher log-probs
// (an advantage.MissingColumnError, told by its type) gets the hint naming
// the store column; other errors, whatever their words, get none.
func TestColumnHint(t *testing.T) {
	hint := func(col string) string {
		return fmt.Sprintf(" (the store has no %s column; add one, or map one with the job file's columns section)", col)
	}
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"values", fmt.Errorf("wrapped: %w", &advantage.MissingColumnError{Fn: "ppo", Column: advantage.InValues}), hint(schema.Values)},
		{"teacher", &advantage.MissingColumnError{Fn: "jsd", Column: advantage.InTeacherLogprobs}, hint(schema.TeacherLogprobs)},
		{"necs", &advantage.MissingColumnError{Fn: "clipv", Column: advantage.InNecs}, ""},
		{"the words alone", schema.BadInputf("advantage fn ppo: missing column values"), ""},
	} {
		if got := columnHint(c.err); got != c.want {
			t.Errorf("%s: hint %q, want %q", c.name, got, c.want)
		}
	}
	// End to end: on_policy_distill over a store without teacher log-probs.
	st, err := stagesOf("on_policy_distill", "", nil)
	if err == nil {
		out := filepath.Join(t.TempDir(), "out.parquet")
		_, err = Run(context.Background(), Job{In: stores + "demo.parquet", Out: out, Stages: st})
	}
	var me *advantage.MissingColumnError
	want := stores + "demo.parquet: advantage fn on_policy_distill: missing column teacher_logprobs" + hint(schema.TeacherLogprobs)
	if !errors.As(err, &me) || !errors.Is(err, schema.ErrBadInput) || err.Error() != want {
		t.Errorf("on_policy_distill without teacher_logprobs: %v, want %q", err, want)
	}
}
