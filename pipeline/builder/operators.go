package builder

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/rftpipe/rftpipe/pipeline"
	"github.com/rftpipe/rftpipe/pipeline/algorithm"
	"github.com/rftpipe/rftpipe/pipeline/job"
	"github.com/rftpipe/rftpipe/stages/operator"
)

// splitOperatorArgs splits command-line args into those of the operators
// named in ops (NAME.key=value, by operator name) and the rest (the fn's
// or add strategy's key=value).
func splitOperatorArgs(ops, kvs []string) (byOp map[string][]string, rest []string) {
	byOp = map[string][]string{}
	for _, kv := range kvs {
		name, arg, ok := strings.Cut(kv, ".")
		if ok && slices.Contains(ops, name) && !strings.Contains(name, "=") {
			byOp[name] = append(byOp[name], arg)
			continue
		}
		rest = append(rest, kv)
	}
	return byOp, rest
}

// OperatorStage returns the stage of the operators pre (the sample
// strategy's read predicate, stalenessOperator), then the experience
// operators of a job file (data_processor.experience_pipeline.operators,
// upstream's names and args), then those of the command line (--operator
// NAME, in order, with --arg NAME.key=value); nil when there are none. kvs
// are the command line's --arg values; it returns those that name no
// operator.
func OperatorStage(file []job.Operator, names, kvs []string, pre ...pipeline.Operator) (pipeline.Stage, []string, error) {
	byOp, rest := splitOperatorArgs(names, kvs)
	if len(pre) == 0 && len(file) == 0 && len(names) == 0 {
		return nil, rest, nil
	}
	reg := operator.Default()
	ops := pre
	for _, o := range file {
		op, err := operator.New(reg, o.Name, o.Args)
		if err != nil {
			return nil, nil, err
		}
		ops = append(ops, pipeline.Operator{Name: o.Name, Op: op})
	}
	for _, name := range names {
		spec, err := reg.Get(name)
		if err != nil {
			return nil, nil, err
		}
		var user map[string]any
		if kv := byOp[name]; len(kv) > 0 {
			if user, err = spec.Params.ParseKV(kv); err != nil {
				return nil, nil, fmt.Errorf("operator %s: %w", name, err)
			}
		}
		op, err := operator.New(reg, name, user)
		if err != nil {
			return nil, nil, err
		}
		ops = append(ops, pipeline.Operator{Name: name, Op: op})
	}
	return pipeline.Operators(ops), rest, nil
}

// stalenessOperator returns the read predicate of a staleness_control
// sample strategy at trainer step step (0: not given, nothing filtered, with
// a warning when max_staleness is set): the rows with model_version <
// max(step − max_staleness, 0) are dropped before the operators and the
// advantage fn see the store, with drop reason stale_model_version. A
// store without model_version is then an error naming the column.
func stalenessOperator(res *algorithm.Resolved, step int64, log io.Writer) ([]pipeline.Operator, error) {
	if res.Config.Fn(algorithm.SampleStrategy) != "staleness_control" {
		return nil, nil
	}
	if step == 0 {
		if _, set := res.Config.Args(algorithm.SampleStrategy)["max_staleness"]; set {
			fmt.Fprintln(log, "warning: sample_strategy staleness_control: no --step, so every model version is read")
		}
		return nil, nil
	}
	min, beyond, err := res.MinModelVersion(step)
	if err != nil || min == 0 {
		return nil, err
	}
	return []pipeline.Operator{{Name: "staleness_control", Op: operator.Staleness{MinVersion: min, Beyond: beyond}}}, nil
}
