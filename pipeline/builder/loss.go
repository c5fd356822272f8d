package builder

import (
	"context"
	"io"

	"github.com/rftpipe/rftpipe/gpu"
	"github.com/rftpipe/rftpipe/pipeline"
	"github.com/rftpipe/rftpipe/pipeline/job"
	"github.com/rftpipe/rftpipe/pipeline/shard"
	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/objective"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// resolve is `loss --fn NAME` or `loss --config FILE`/`--algorithm NAME`:
// the input and monitoring files, then (complete) the objective, the
// columns of its inputs, the device and the one loss stage.
func (o *LossOptions) resolve() (*plan, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	j := &pipeline.Job{In: o.In, Out: o.GradOut, OutFlag: "--grad-out", Keep: idColumns, Metrics: o.Metrics, Prom: o.Prom}
	p := newPlan(&o.Common, j, o.Fn)
	if o.Sharded { // the loss refuses it (a cross-batch stage), naming why
		s, err := shard.New(o.Shards, o.ShardIndex)
		if err != nil {
			return nil, err
		}
		j.Shard = &s
	}
	var file *job.File
	if o.byFile() {
		var err error
		if file, err = loadFile(&o.Common, ""); err != nil {
			return nil, err
		}
		if err := frame(&o.Common, file, j); err != nil {
			return nil, err
		}
	}
	if j.In == "" {
		return nil, schema.Usagef("give --in STORE")
	}
	p.complete = func(j *pipeline.Job) error {
		obj, err := o.objective(file)
		if err != nil {
			return err
		}
		if o.Label == "" {
			j.Label = fileLabel(o.Config, obj.Policy.Name())
		}
		j.Objective, j.Name = obj, obj.Policy.Name()
		cols, err := colMap(o.Cols)
		if err != nil {
			return err
		}
		for name, col := range j.Columns { // the job file's columns of inputs; --col wins
			in, known := schema.ParseInput(name)
			if _, set := cols[string(in)]; !set && known {
				cols[string(in)] = col
			}
		}
		ev, err := o.evaluator(obj)
		if err != nil {
			return err
		}
		p.loss = pipeline.NewLoss(obj, ev, cols, o.Step)
		j.Stages = []pipeline.Stage{p.loss}
		return nil
	}
	return p, nil
}

// objective returns the loss's objective: by flags (FlagObjective), else
// the job file's resolved algorithm's.
func (o *LossOptions) objective(f *job.File) (*objective.Objective, error) {
	if f == nil {
		return FlagObjective(o)
	}
	res, err := resolveAlgorithm(&o.Common, f)
	if err != nil {
		return nil, err
	}
	return res.Objective()
}

// evaluator selects the device evaluating obj's kernels: a policy loss
// without device kernels runs on the CPU under auto, and refuses cuda.
func (o *LossOptions) evaluator(obj *objective.Objective) (tokens.Evaluator, error) {
	device := o.Device
	if obj.Policy.Def.CPUOnly && device != "cpu" {
		if device == "cuda" {
			return nil, schema.BadInputf("policy loss %s has no device kernels: use --device cpu (or auto)", obj.Policy.Name())
		}
		device = "cpu"
	}
	ev, _, err := gpu.Select(device, o.Log)
	return ev, err
}

// LossReport is what a loss job computed, for the command to print.
type LossReport struct {
	// Fn and Args are the policy loss and its arguments.
	Fn   string
	Args map[string]any
	// Rows and Tokens count the batch's rows and its response tokens.
	Rows   int64
	Tokens int
	// Loss is final_loss; Metrics the trainer's metrics (actor/...).
	Loss    float64
	Metrics map[string]float64
	// Warnings are the input's (rows a buffer read but did not yield).
	Warnings []string
}

// Loss builds the job of a loss's options and runs it (Run's sequence).
func Loss(ctx context.Context, o *LossOptions, status func(error) int) (*LossReport, error) {
	p, res, err := execute(ctx, o, status)
	if err != nil {
		return nil, err
	}
	r := p.loss.Result()
	return &LossReport{Fn: p.job.Objective.Policy.Name(), Args: p.job.Objective.Policy.Args, Rows: res.In, Tokens: p.loss.Tokens(),
		Loss: r.Loss, Metrics: r.Metrics, Warnings: res.Warnings}, nil
}
