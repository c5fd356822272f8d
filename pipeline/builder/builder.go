// Package builder is the one place that turns what a user asks for into a
// pipeline.Job and runs it. Each job command has its own options type —
// RunOptions (`run`: an advantage fn, add strategy or operators by flags, a
// job file, or an algorithm type) and LossOptions (`loss`: a policy loss
// and its terms by flags, or a job file's or algorithm's objective) — and
// every command runs the same sequence (Run, Loss; execute):
//
//   - resolve: the options validated, the job file read (package job) and
//     the job's input, outputs and monitoring files set;
//   - check: every output against every input and each other
//     (pipeline.Job.CheckOutputs) before anything is written;
//   - complete and run: the algorithm resolved (package algorithm), the
//     stages built (stages.go, objective.go, operators.go) and the job run
//     (pipeline.Run);
//   - monitor: the metrics and Prometheus files written, failed or not
//     (monitor.go), once resolve got that far or from the command line's
//     paths when it did not.
//
// catalog.go lists the registries' components for help texts.
package builder

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/rftpipe/rftpipe/pipeline"
	"github.com/rftpipe/rftpipe/pipeline/algorithm"
	"github.com/rftpipe/rftpipe/pipeline/job"
	"github.com/rftpipe/rftpipe/pipeline/shard"
	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/schema/table"
	"github.com/rftpipe/rftpipe/schema/trinity"
)

// plan is a job being built: the job with its input, outputs and
// monitoring files set (resolve), then its stages (complete). The
// monitoring files are known before the stages are built, so a job that
// fails to build still reports its failure in them.
type plan struct {
	job *pipeline.Job
	// complete adds the stages.
	complete func(j *pipeline.Job) error
	// parts is the directory of a sharded run's parts ("": not sharded).
	parts string
	shard *shard.Shard
	// settings are what a sharded run's plan records of the job
	// (shard.Plan.Job); replace replaces a directory of another plan.
	settings []string
	replace  bool
	// makeOut makes the missing directories of the output store.
	makeOut bool
	// loss is a loss job's one stage (nil for run).
	loss *pipeline.LossStage
	// since is the increment a run --since-last reads (nil otherwise).
	since *table.Increment
}

// command is the options of one command that builds and runs a job.
type command interface {
	common() *Common
	// resolve validates the options and returns the job's plan: its
	// input, outputs and monitoring files, and what completes it.
	resolve() (*plan, error)
}

func (c *Common) common() *Common { return c }

// Job builds the job of a run's options (as Run would, without running
// it).
func (o *RunOptions) Job() (*pipeline.Job, error) { return build(o) }

// Job builds the job of a loss's options (as Loss would, without running
// it).
func (o *LossOptions) Job() (*pipeline.Job, error) { return build(o) }

func build(c command) (*pipeline.Job, error) {
	p, err := c.resolve()
	if err != nil {
		return nil, err
	}
	if err := p.complete(p.job); err != nil {
		return nil, err
	}
	return p.job, nil
}

// newPlan returns the plan of job j, labelled (--job-label over def).
func newPlan(c *Common, j *pipeline.Job, def string) *plan {
	j.Label = label(c, def)
	return &plan{job: j, replace: c.Replace}
}

// resolve is `run`: by flags (--advantage-fn, --add-strategy,
// --operator) or by a job file or algorithm.
func (o *RunOptions) resolve() (*plan, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	var p *plan
	var err error
	if o.byFile() {
		p, err = o.resolveFile()
	} else {
		p = o.resolveFlags()
	}
	if err != nil {
		return nil, err
	}
	p.makeOut = true
	p.settings = o.settings()
	if o.SinceLast {
		if err := p.sinceLast(); err != nil {
			return nil, err
		}
	}
	return p, p.shardOut(&o.Common)
}

// sinceLast makes the job read the rows of its input table ingested since
// its last successful run (table.SinceLast).
func (p *plan) sinceLast() error {
	j := p.job
	if j.In == "" || j.Out == "" {
		return schema.Usagef("--since-last needs an input table and an output store (--in, --out)")
	}
	if trinity.IsURL(j.Out) {
		return schema.Usagef("--since-last keeps its watermark beside the output: write a file store, not the buffer %s", schema.Redact(j.Out))
	}
	inc, err := table.SinceLast(j.In, j.Out, j.Label, store.ReadFile)
	if err != nil {
		return err
	}
	p.since, j.In = inc, inc.In
	mark, _, err := inc.Mark()
	if err != nil {
		return err
	}
	if _, err := os.Lstat(mark); err == nil { // an existing one is written over: refuse a link or a stream before any work
		if err := store.CheckWritable(mark); err != nil {
			return err
		}
	}
	j.Also = append(j.Also, store.Output{Flag: "the --since-last watermark", Path: mark})
	return nil
}

// runJob is the pipeline.Job fields every run shares.
func (o *RunOptions) runJob() *pipeline.Job {
	return &pipeline.Job{
		In: o.In, Out: o.Out, Seed: o.Seed, OnInvalidReward: o.OnInvalidReward,
		Parquet:  store.ParquetOptions{Codec: o.Codec},
		Progress: o.Progress, Total: o.Total, InsideInput: o.InsideInput,
		Metrics: o.Metrics, Prom: o.Prom, Rejected: o.Rejected,
	}
}

// resolveFlags is `run --advantage-fn NAME` / `--add-strategy NAME` /
// `--operator NAME`.
func (o *RunOptions) resolveFlags() *plan {
	fn, strategy := o.AdvantageFn, o.AddStrategy
	j := o.runJob()
	def := fn
	j.Name = fn
	switch {
	case strategy != "":
		def, j.Name = "add_strategy/"+strategy, "add strategy "+strategy
	case fn == "":
		def, j.Name = "operators", "operators "+strings.Join(o.Operators, ", ")
	}
	p := newPlan(&o.Common, j, def)
	p.complete = func(j *pipeline.Job) error {
		ops, kvs, err := OperatorStage(nil, o.Operators, o.Args)
		if err != nil {
			return err
		}
		switch {
		case strategy != "":
			j.Stages, err = StrategyStages(strategy, kvs)
		case fn != "":
			j.Stages, err = FnStages(fn, kvs)
		case len(kvs) > 0:
			err = schema.Usagef("--arg %s names no --operator (operator args are NAME.key=value)", kvs[0])
		}
		if err != nil {
			return err
		}
		if ops != nil {
			j.Stages = append([]pipeline.Stage{ops}, j.Stages...)
		}
		if j.Out == "" || j.In == "" {
			return schema.Usagef("give --in STORE and --out STORE")
		}
		return nil
	}
	return p
}

// loadFile reads c.Config (if any) and applies the command-line overrides
// among Algorithm, In, Metrics, Prom and Seed, and out (the output store).
func loadFile(c *Common, out string) (*job.File, error) {
	f := &job.File{File: "command line"}
	if c.Config != "" {
		var err error
		if f, err = job.Load(c.Config); err != nil {
			return nil, err
		}
	}
	if c.Algorithm != "" {
		f.SetAlgorithmType(c.Algorithm)
	}
	f.Override("input", c.In)
	f.Override("output", out)
	f.Override("metrics", c.Metrics)
	f.Override("prom", c.Prom)
	if c.HasSeed {
		f.Seed, f.HasSeed = c.Seed, true
	}
	return f, nil
}

// frame gives j what a job file says of it: input, monitoring files,
// columns and the file as a read (beside the input).
func frame(c *Common, f *job.File, j *pipeline.Job) error {
	var err error
	if j.In, err = f.InputStore(); err != nil { // --in, when given, is f.Input
		return err
	}
	if j.Metrics, j.Prom, err = f.Monitoring(); err != nil {
		return err
	}
	j.Columns = f.Columns
	if c.Config != "" {
		j.Reads = []string{c.Config}
	}
	return nil
}

// resolveAlgorithm resolves the file's algorithm and logs the warnings.
func resolveAlgorithm(c *Common, f *job.File) (*algorithm.Resolved, error) {
	res, err := f.Resolve()
	if err != nil {
		return nil, err
	}
	for _, w := range res.Warnings {
		fmt.Fprintln(c.Log, "warning: "+w)
	}
	if c.Verbose { // keys accepted for compatibility and ignored
		for _, w := range f.Warnings {
			fmt.Fprintln(c.Log, "note: "+w)
		}
	}
	return res, nil
}

// fileLabel names a job by its file (without extension), else by name.
func fileLabel(file, name string) string {
	if file != "" && file != "command line" {
		return strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	}
	return name
}

// resolveFile is `run --config FILE` / `--algorithm NAME`.
func (o *RunOptions) resolveFile() (*plan, error) {
	f, err := loadFile(&o.Common, o.Out)
	if err != nil {
		return nil, err
	}
	j := o.runJob()
	if err := frame(&o.Common, f, j); err != nil {
		return nil, err
	}
	if j.Out, err = f.OutputStore(); err != nil {
		return nil, err
	}
	j.Seed = f.Seed
	if j.OnInvalidReward == "" { // --on-invalid-reward overrides the file
		j.OnInvalidReward = f.OnInvalidReward
	}
	p := newPlan(&o.Common, j, fileLabel(f.File, f.Algorithm.AlgorithmType))
	p.complete = func(j *pipeline.Job) error {
		res, err := resolveAlgorithm(&o.Common, f)
		if err != nil {
			return err
		}
		if j.In == "" || j.Out == "" {
			return schema.BadInputf("a job needs an input and an output store (input:, output: or --in, --out; or a Trinity config's buffer.trainer_input.experience_buffer)")
		}
		j.Name = fmt.Sprintf("algorithm %s (%s)", res.Config.AlgorithmType, What(res))
		j.Stages, err = o.fileStages(f, res)
		return err
	}
	return p, nil
}

// fileStages returns the stages of a job file's run: the rollout
// correction, the operators (the sample strategy's predicate, the file's,
// the command line's), then what the algorithm computes (Stages).
func (o *RunOptions) fileStages(f *job.File, res *algorithm.Resolved) ([]pipeline.Stage, error) {
	stale, err := stalenessOperator(res, o.Step, o.Log)
	if err != nil {
		return nil, err
	}
	fileOps, skipped, err := f.RunOperators(o.SkipOperators)
	if err != nil {
		return nil, err
	}
	for _, s := range skipped {
		fmt.Fprintln(o.Log, "warning: "+s)
	}
	ops, kvs, err := OperatorStage(fileOps, o.Operators, o.Args, stale...)
	if err != nil {
		return nil, err
	}
	stages, err := Stages(res, kvs)
	if err != nil {
		return nil, err
	}
	if ops != nil { // upstream appends the advantage fn as the last operator
		stages = append([]pipeline.Stage{ops}, stages...)
	}
	if f.RolloutCorrection != nil {
		c, err := correction(f.RolloutCorrection)
		if err != nil {
			return nil, err
		}
		if c != nil { // first: the rejection-sampled mask is the one advantages see
			stages = append([]pipeline.Stage{pipeline.RolloutCorrection(c)}, stages...)
		}
	}
	return stages, nil
}

// settings are the settings of a sharded run its plan records
// (shard.Plan.Job): what the command line and job file choose.
func (o *RunOptions) settings() []string {
	s := []string{"command=run"}
	for _, kv := range []struct{ k, v string }{
		{"advantage_fn", o.AdvantageFn}, {"add_strategy", o.AddStrategy}, {"algorithm", o.Algorithm},
		{"on_invalid_reward", o.OnInvalidReward}, {"codec", o.Codec},
	} {
		if kv.v != "" {
			s = append(s, kv.k+"="+kv.v)
		}
	}
	if o.Config != "" {
		abs, _ := filepath.Abs(o.Config)
		sum := "unreadable"
		if b, err := os.ReadFile(o.Config); err == nil {
			sum = fmt.Sprintf("%x", sha256.Sum256(b))
		}
		s = append(s, "config="+abs, "config_sha256="+sum)
	}
	s = append(s, argsOf("operator", o.Operators)...)
	s = append(s, argsOf("skip-operator", o.SkipOperators)...)
	s = append(s, argsOf("arg", o.Args)...)
	if o.HasSeed {
		s = append(s, fmt.Sprintf("seed=%d", o.Seed))
	}
	return s
}

// shardOut makes a sharded run's output the part of its shard in the
// directory of parts Out.
func (p *plan) shardOut(c *Common) error {
	if !c.Sharded {
		return nil
	}
	s, err := shard.New(c.Shards, c.ShardIndex)
	if err != nil {
		return err
	}
	out := p.job.Out
	if out == "" {
		return schema.Usagef("--shards needs --out DIR (the directory of the parts)")
	}
	if ext := filepath.Ext(out); ext != "" {
		if _, err := store.FormatOf(out); err == nil {
			return schema.Usagef("with --shards, --out is a directory of parts, not the store %s", out)
		}
	}
	p.parts, p.shard = out, &s
	p.job.Shard, p.job.Out, p.job.OutParts = &s, shard.PartPath(out, s.I), out
	p.job.Also = append(p.job.Also, store.Output{Flag: "the shard plan", Path: shard.PlanPath(out), Dir: out},
		store.Output{Flag: "the shard's metrics", Path: shard.MetricsPath(out, s.I), Dir: out})
	// Each shard writes its own rejected rows: --rejected is a directory
	// of parts too (REJ/part-I.parquet).
	if rej := p.job.Rejected; rej != "" {
		if f, err := store.FormatOf(rej); err == nil && (f == store.TrinityBuffer || filepath.Ext(rej) != "") {
			return schema.Usagef("with --shards, --rejected is a directory of parts (REJ/part-I.parquet), not the store %s", schema.Redact(rej))
		}
		p.job.Rejected, p.job.RejectedParts = shard.PartPath(rej, s.I), rej
		p.job.Also = append(p.job.Also, store.Output{Flag: "the shard plan of --rejected", Path: shard.PlanPath(rej), Dir: rej})
	}
	return nil
}
