package tokens

import (
	"encoding/json"
	"fmt"

	"github.com/rftpipe/rftpipe/stages/conformance"
)

// FromCase builds a batch from a golden case's inputs: every per-token input
// present (rows as in the file, padding included — Rows.Width is the padded
// T), expert_mask, and the call's step broadcast to every row. The layout
// comes from the first per-token input found in canonical order.
func FromCase(c *conformance.Case) (*Batch, error) {
	var b *Batch
	for _, name := range tokenInputs {
		raw, ok := c.Inputs[name]
		if !ok {
			continue
		}
		m, err := conformance.Matrix(raw)
		if err != nil {
			return nil, fmt.Errorf("input %s: %w", name, err)
		}
		if b == nil {
			if b, err = FromMatrix(name, m); err != nil {
				return nil, err
			}
			continue
		}
		if err := b.SetMatrix(name, m); err != nil {
			return nil, err
		}
	}
	if b == nil {
		return nil, fmt.Errorf("case %s has no per-token input", c.Name)
	}
	if raw, ok := c.Inputs[ExpertMask]; ok {
		v, err := conformance.Floats(raw)
		if err != nil {
			return nil, fmt.Errorf("input %s: %w", ExpertMask, err)
		}
		e := make([]bool, len(v))
		for i, x := range v {
			e[i] = x != 0
		}
		if err := b.SetExpertMask(e); err != nil {
			return nil, err
		}
	}
	if raw, ok := c.Call[Step]; ok {
		var s int64
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("call.step: %w", err)
		}
		steps := make([]int64, b.Rows.N())
		for i := range steps {
			steps[i] = s
		}
		if err := b.SetStep(steps); err != nil {
			return nil, err
		}
	}
	return b, nil
}
