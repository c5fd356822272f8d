package pipeline

import (
	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/rollout"
)

// RolloutCorrection returns the stage of verl's rollout correction in
// decoupled mode: for every batch, the truncated importance-sampling
// weights of the trainer's old log-probs (old_logprob) against the rollout
// engine's (logprobs), written as rollout_is_weights, and the
// rejection-sampled mask, written over action_mask; the metrics under
// rollout_corr/… at the end. Batch normalisation of the weights takes one
// statistics pass (their batch mean). Bypass mode writes nothing: the
// bypass_mode loss runs the correction itself.
func RolloutCorrection(c *rollout.Corrector) Stage { return &correctionStage{c: c} }

type correctionStage struct {
	c    *rollout.Corrector
	norm rollout.Norm
	acc  rollout.Acc
}

func (s *correctionStage) Name() string { return "rollout_correction" }

func (s *correctionStage) Needs() Needs {
	n := Needs{Columns: []string{schema.ActionMask, schema.Logprobs, schema.OldLogprob},
		// Its metrics are moments and extrema over the store's tokens (and
		// batch normalisation divides by the store's mean weight), which
		// the part metrics of shards do not combine.
		CrossBatch: "rollout correction reports its metrics (and normalises its weights) over the store as one batch"}
	if s.c.NeedsFirstPass() {
		n.Passes = 1
	}
	if s.c.Config().RS != "" {
		n.Writes = append(n.Writes, schema.ActionMask)
	}
	if s.c.Weighted() {
		n.Writes = append(n.Writes, schema.RolloutISWeights)
	}
	return n
}

// input returns the batch's correction input.
func (s *correctionStage) input(b *Batch) (rollout.Input, error) {
	rows, err := b.Rows()
	if err != nil {
		return rollout.Input{}, err
	}
	in := rollout.Input{Rows: rows}
	v, err := b.TokensOf(schema.OldLogprob, schema.Logprobs, schema.ActionMask)
	if err != nil {
		return in, err
	}
	in.Old, in.Rollout, in.Mask = v[0], v[1], v[2]
	return in, nil
}

func (s *correctionStage) Observe(_ int, b *Batch) error {
	in, err := s.input(b)
	if err != nil {
		return err
	}
	return s.c.Observe(&s.norm, in)
}

func (s *correctionStage) Apply(b *Batch) error {
	in, err := s.input(b)
	if err != nil {
		return err
	}
	mask := make([]float64, len(in.Mask))
	var w []float64
	if s.c.Weighted() {
		w = make([]float64, len(in.Mask))
	}
	var acc rollout.Acc
	if err := s.c.Apply(in, &s.norm, w, mask, &acc); err != nil {
		return err
	}
	s.acc.Merge(s.c, &acc)
	if s.c.Config().RS != "" {
		if err := b.SetList(schema.ActionMask, mask); err != nil {
			return err
		}
		b.SetTokens(schema.ActionMask, mask) // the stages after see the new mask
	}
	if w != nil {
		return b.SetList(schema.RolloutISWeights, w)
	}
	return nil
}

func (s *correctionStage) Finish(res *Result) error {
	m, err := s.c.Metrics(&s.acc, &s.norm)
	if err != nil {
		return err
	}
	res.Metrics.Merge("", m)
	return nil
}
