package build

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rftpipe/rftpipe/pipeline"
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

// OperatorStage returns the stage of the experience operators of a job
// file (data_processor.experience_pipeline.operators, upstream's names and
// args) followed by those of the command line (--operator NAME, in order,
// with --arg NAME.key=value); nil when there are none. kvs are the
// command line's --arg values; it returns those that name no operator.
func OperatorStage(file []job.Operator, names, kvs []string) (pipeline.Stage, []string, error) {
	byOp, rest := splitOperatorArgs(names, kvs)
	if len(file) == 0 && len(names) == 0 {
		return nil, rest, nil
	}
	reg := operator.Default()
	var ops []pipeline.Operator
	for _, o := range file {
		op, err := reg.New(o.Name, o.Args)
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
		op, err := reg.New(name, user)
		if err != nil {
			return nil, nil, err
		}
		ops = append(ops, pipeline.Operator{Name: name, Op: op})
	}
	return pipeline.Operators(ops), rest, nil
}
