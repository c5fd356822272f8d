package pipeline

import (
	"fmt"
	"testing"

	"github.com/rftpipe/rftpipe/stages/addstrategy"
	"github.com/rftpipe/rftpipe/stages/advantage"
)

// stagesOf returns the stages of advantage fn fn (or add strategy) with
// command-line args kvs, as `rftpipe run --advantage-fn` builds them.
func stagesOf(fn, strategy string, kvs []string) ([]Stage, error) {
	reg, name := advantage.Default(), fn
	if strategy != "" {
		reg, name = addstrategy.Default(), strategy
	}
	spec, err := reg.Get(name)
	if err != nil {
		return nil, err
	}
	var user map[string]any
	if len(kvs) > 0 {
		if user, err = spec.Params.ParseKV(kvs); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	if spec.Side() == advantage.TrainerSide {
		f, err := reg.Trainer(name, user)
		if err != nil {
			return nil, err
		}
		return TrainerSide(name, f, nil), nil
	}
	f, err := reg.Pipeline(name, user)
	if err != nil {
		return nil, err
	}
	return PipelineSide(name, f), nil
}

// withFn sets job's stages to those of fn (or add strategy) with args kvs.
func withFn(t testing.TB, job Job, fn, strategy string, kvs ...string) Job {
	t.Helper()
	st, err := stagesOf(fn, strategy, kvs)
	if err != nil {
		t.Fatal(err)
	}
	job.Stages = st
	return job
}
