package pipeline

import (
	"fmt"
	"testing"

	"github.com/rftpipe/rftpipe/stages/addstrategy"
	"github.com/rftpipe/rftpipe/stages/advantage"
	"github.com/rftpipe/rftpipe/stages/registry"
)

// stagesOf returns the stages of advantage fn fn (or add strategy) with
// command-line args kvs, as `rftpipe run --advantage-fn` builds them.
func stagesOf(fn, strategy string, kvs []string) ([]Stage, error) {
	if strategy != "" {
		user, err := parseArgs(addstrategy.Default(), strategy, kvs)
		if err != nil {
			return nil, err
		}
		f, err := addstrategy.New(addstrategy.Default(), strategy, user)
		if err != nil {
			return nil, err
		}
		return PipelineSide(strategy, f), nil
	}
	reg := advantage.Default()
	user, err := parseArgs(reg, fn, kvs)
	if err != nil {
		return nil, err
	}
	spec, _ := reg.Get(fn)
	if spec.New.Side() == advantage.TrainerSide {
		f, err := advantage.Trainer(reg, fn, user)
		if err != nil {
			return nil, err
		}
		return TrainerSide(fn, f, nil), nil
	}
	f, err := advantage.Pipeline(reg, fn, user)
	if err != nil {
		return nil, err
	}
	return PipelineSide(fn, f), nil
}

// parseArgs parses the command-line args kvs of component name of reg (none:
// nil, default_args()).
func parseArgs[C any](reg *registry.Registry[C], name string, kvs []string) (map[string]any, error) {
	spec, err := reg.Get(name)
	if err != nil || len(kvs) == 0 {
		return nil, err
	}
	user, err := spec.Params.ParseKV(kvs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return user, nil
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
