package addstrategy

import (
	"encoding/json"
	"fmt"

	"github.com/rftpipe/rftpipe/stages/advantage"
	"github.com/rftpipe/rftpipe/stages/conformance"
)

// ConformanceRunner returns the conformance runner of kind "add_strategy"
// over the strategies of reg (Default() if nil). The wall-clock metric
// add_strategy_time is left out of the comparison, as the golden files
// leave it out.
func ConformanceRunner(reg *Registry) conformance.Runner {
	if reg == nil {
		reg = Default()
	}
	return func(c *conformance.Case, chk *conformance.Checker) error {
		exps, err := advantage.DecodeGolden(c)
		if err != nil {
			return err
		}
		args, err := advantage.GoldenArgs(c)
		if err != nil {
			return err
		}
		s, err := New(reg, c.Fn, args)
		if err != nil {
			return err
		}
		var want struct {
			Count   int                     `json:"count"`
			Metrics json.RawMessage         `json:"metrics"`
			Writes  [][]advantage.GoldenRow `json:"writes"`
		}
		if err := json.Unmarshal(c.Expected, &want); err != nil {
			return fmt.Errorf("%s: expected: %w", c.Name, err)
		}
		in := advantage.GoldenInput(exps, 0)
		p, err := s.Plan(in)
		if err != nil {
			return err
		}
		delete(p.Metrics, "add_strategy_time")
		if err := chk.MetricsJSON("metrics", p.Metrics, want.Metrics); err != nil {
			return err
		}
		chk.Int("count", len(p.Output()), want.Count)
		writes := s.Writes(p, in)
		chk.Int("writes", len(writes), len(want.Writes))
		if len(writes) != len(want.Writes) {
			return nil
		}
		for i, w := range writes {
			rows, err := advantage.PlanRows(p, w, exps)
			if err != nil {
				return err
			}
			advantage.CheckRows(chk, fmt.Sprintf("writes[%d]", i), rows, want.Writes[i])
		}
		return nil
	}
}
