package inspect

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/schema"
)

const fixtures = "../../fixtures/"

func TestDemo(t *testing.T) {
	s, err := Store(context.Background(), fixtures+"stores/demo.parquet")
	if err != nil {
		t.Fatal(err)
	}
	// demo: 48 tasks (3 batches of 16) × 8 runs, one step, prompt 16, responses 16..64.
	if s.Rows != 384 || s.Batches != 3 || s.Tasks != 48 || s.Runs != 384 || s.Steps != 1 || s.Files != 1 {
		t.Errorf("summary %+v", s)
	}
	if s.Reward == nil || s.Reward.Count != 384 || s.Reward.Invalid != 0 || s.Reward.Min != 0 || s.Reward.Max != 1 {
		t.Errorf("reward %+v", s.Reward)
	}
	if r := s.Response; r == nil || r.Min < 16 || r.Max > 64 || r.Count != 384 {
		t.Errorf("response length %+v", r)
	}
	var buf bytes.Buffer
	if err := s.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), `\u003c`) || !strings.Contains(buf.String(), `"list<`) {
		t.Errorf("JSON escapes < and >: %s", buf.String())
	}
	var back Summary
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil || back.Rows != s.Rows || back.Columns[0] != s.Columns[0] {
		t.Errorf("JSON does not read back: %v", err)
	}
}

func TestStats(t *testing.T) {
	var s Stats
	for _, v := range []float64{1, 2, 3, 4, math.NaN(), math.Inf(-1)} {
		s.Add(v)
	}
	if s.Count != 4 || s.Invalid != 2 || s.Mean != 2.5 || math.Abs(s.Std-math.Sqrt(5.0/3)) > 1e-12 || s.Min != 1 || s.Max != 4 {
		t.Errorf("stats %+v", s)
	}
}

// TestValidates checks that inspect refuses the bad stores other commands
// refuse, with one line naming file, row and column, and counts the
// invalid rewards it is there to find.
func TestValidates(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{"ragged.jsonl", `row 1: column "action_mask": ragged row`},
		{"null_id.jsonl", `row 1: column "task": null id`},
		{"token_mismatch.jsonl", `row 0: column "tokens": 4 response tokens but logprobs has 2`},
		{"nan_logprob.jsonl", `row 0: column "logprobs": log-prob NaN`},
	} {
		_, err := Store(context.Background(), fixtures+"bad/"+c.file)
		if err == nil || !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), c.file+": "+c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want %q", c.file, err, c.want)
		}
	}
	s, err := Store(context.Background(), fixtures+"bad/nan_reward.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if s.Reward.Invalid != 1 || s.Reward.Count != s.Rows-1 {
		t.Errorf("nan reward: %+v", s.Reward)
	}
}
