// Package build is the one place that turns what a user asks for (a command
// line's names and flags, a job file, an algorithm type) into a
// pipeline.Job, and runs it with the output handling every job shares.
//
//   - FromFlags: `run --advantage-fn NAME` / `--add-strategy NAME`, `loss
//     --fn NAME` (stages.go, objective.go);
//   - FromConfig: a job file (package job decodes it), flags overriding it;
//   - FromAlgorithm: an algorithm type with its default config
//     (package algorithm resolves it).
//
// Each returns one pipeline.Job: stages, objective, outputs and monitoring
// files. Execute runs it: every output is checked against every input
// (pipeline.Job.CheckOutputs) before anything is written, missing output
// directories are made, the store is written through a temp file and a
// rename (pipeline.Run), a sharded run's part records its metrics, and the
// metrics and Prometheus files are written, failed or not (monitor.go).
package build

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rftpipe/rftpipe/gpu"
	"github.com/rftpipe/rftpipe/pipeline"
	"github.com/rftpipe/rftpipe/pipeline/algorithm"
	"github.com/rftpipe/rftpipe/pipeline/job"
	"github.com/rftpipe/rftpipe/pipeline/shard"
	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/objstore"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/schema/trinity"
	"github.com/rftpipe/rftpipe/stages/objective"
)

// Commands building jobs.
const (
	Run  = "run"  // advantages: an advantage fn, add strategy or algorithm
	Loss = "loss" // a trainer objective over a store as one batch
)

// Options are the words of a `run` or `loss` command line. A job file
// (Config) supplies what they leave empty; what they set overrides it.
type Options struct {
	// Command is Run or Loss.
	Command string
	// AdvantageFn or AddStrategy (run), Fn (loss), with Args (NAME=VALUE):
	// a job by flags. With a job file or algorithm, Args override the
	// advantage fn's arguments (run).
	AdvantageFn, AddStrategy, Fn string
	Args                         []string
	// Operators are experience operators (stages/operator) run in order
	// before the advantage fn (run); an arg NAME.key=value goes to the
	// operator NAME. A job file's data_processor operators run first.
	Operators []string
	// SkipOperators are operators of the job file not to run (by name), an
	// unknown one among them; each skipped one is reported on Log.
	SkipOperators []string
	// Rejected is the store of the rows the run drops (pipeline.Job).
	Rejected string
	// Config is a job file; Algorithm an algorithm type (overriding the
	// file's).
	Config, Algorithm string
	// In, Out, Metrics and Prom are the input store, output store, metrics
	// (JSON) and Prometheus files; GradOut the gradient file of a loss.
	In, Out, GradOut, Metrics, Prom string
	// Label is the job label of the monitoring files (default: the job
	// file's name, else the algorithm or fn).
	Label string
	// Seed seeds the random choices (HasSeed: given).
	Seed    uint64
	HasSeed bool
	// OnInvalidReward, Codec and InsideInput configure a run
	// (pipeline.Job).
	OnInvalidReward, Codec string
	InsideInput            bool
	// Sharded runs shard ShardIndex of Shards: Out is then a directory of
	// parts, holding their plan (shard.Plan); Replace replaces a directory
	// of another plan whole instead of refusing it.
	Sharded            bool
	Shards, ShardIndex int
	Replace            bool
	// The loss's terms (loss by flags): loss_agg_mode, KL loss fn and
	// coefficient, entropy loss fn and coefficient.
	LossAggMode, KLLossFn, EntropyLossFn string
	KLCoef, EntropyCoef                  float64
	// Cols map the loss's inputs to store columns (INPUT=COLUMN); Step is
	// the training step (loss; run: the trainer step about to run, what
	// staleness_control's predicate reads, 0 not given); Device evaluates
	// the kernels (gpu.Select).
	Cols   []string
	Step   int64
	Device string
	// Verbose lists the job file's ignored keys on Log, where warnings go.
	Verbose bool
	Log     io.Writer
	// Progress and Total report progress (pipeline.Job).
	Progress, Total func(rows int64)
}

// usagef is a usage error (exit 2).
func usagef(format string, args ...any) error {
	return fmt.Errorf("%w: %s", schema.ErrUsage, fmt.Sprintf(format, args...))
}

// IsFile reports whether o selects a job file or an algorithm (else its
// job is by flags).
func (o *Options) IsFile() bool { return o.Config != "" || o.Algorithm != "" }

// plan is a job being built: the job with its outputs and monitoring set,
// and what completes it inside the monitored run (errors there are
// reported in the monitoring files).
type plan struct {
	job *pipeline.Job
	// complete adds the stages.
	complete func(j *pipeline.Job) error
	// parts is the directory of a sharded run's parts ("": not sharded).
	parts string
	shard *shard.Shard
}

// FromFlags builds the job of `run --advantage-fn`/`--add-strategy` or
// `loss --fn`.
func FromFlags(o *Options) (*pipeline.Job, error) {
	if o.IsFile() {
		return nil, usagef("FromFlags: the options select a job file or algorithm")
	}
	return build(o)
}

// FromConfig builds the job of a job file (o.Config), the options
// overriding it.
func FromConfig(o *Options) (*pipeline.Job, error) {
	if o.Config == "" {
		return nil, usagef("no job file")
	}
	return build(o)
}

// FromAlgorithm builds the job of an algorithm type (o.Algorithm) with its
// default config.
func FromAlgorithm(o *Options) (*pipeline.Job, error) {
	if o.Algorithm == "" {
		return nil, usagef("no algorithm")
	}
	return build(o)
}

func build(o *Options) (*pipeline.Job, error) {
	p, err := prepare(o)
	if err != nil {
		return nil, err
	}
	if err := p.complete(p.job); err != nil {
		return nil, err
	}
	return p.job, nil
}

// prepare dispatches on the options' route.
func prepare(o *Options) (*plan, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	var p *plan
	var err error
	switch {
	case o.Command == Loss:
		p, err = prepareLoss(o)
	case o.Command != Run:
		return nil, usagef("unknown command %q", o.Command)
	case o.IsFile():
		p, err = prepareFile(o)
	default:
		p, err = prepareFlags(o)
	}
	if err != nil {
		return nil, err
	}
	if o.Label != "" {
		p.job.Label = o.Label
	}
	return p, nil
}

// runJob is the pipeline.Job fields every run shares.
func runJob(o *Options) *pipeline.Job {
	return &pipeline.Job{
		In: o.In, Out: o.Out, Seed: o.Seed, OnInvalidReward: o.OnInvalidReward,
		Parquet:  store.ParquetOptions{Codec: o.Codec},
		Progress: o.Progress, Total: o.Total, InsideInput: o.InsideInput,
		Metrics: o.Metrics, Prom: o.Prom, Rejected: o.Rejected,
	}
}

// prepareFlags is `run --advantage-fn NAME` / `--add-strategy NAME`.
func prepareFlags(o *Options) (*plan, error) {
	fn, strategy := o.AdvantageFn, o.AddStrategy
	if len(o.SkipOperators) > 0 {
		return nil, usagef("--skip-operator skips an operator of a job file (--config)")
	}
	if fn != "" && strategy != "" || fn == "" && strategy == "" && len(o.Operators) == 0 {
		return nil, usagef("give exactly one of --advantage-fn and --add-strategy, or --operator")
	}
	j := runJob(o)
	j.Label, j.Name = fn, fn
	switch {
	case strategy != "":
		j.Label, j.Name = "add_strategy/"+strategy, "add strategy "+strategy
	case fn == "":
		j.Label, j.Name = "operators", "operators "+strings.Join(o.Operators, ", ")
	}
	p := &plan{job: j}
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
			err = usagef("--arg %s names no --operator (operator args are NAME.key=value)", kvs[0])
		}
		if err != nil {
			return err
		}
		if ops != nil {
			j.Stages = append([]pipeline.Stage{ops}, j.Stages...)
		}
		if j.Out == "" || j.In == "" {
			return usagef("give --in STORE and --out STORE")
		}
		return nil
	}
	return p, p.shardOut(o)
}

// loadFile reads o.Config (if any) and applies the command-line overrides
// among Algorithm, In, Out, Metrics, Prom and Seed.
func loadFile(o *Options) (*job.File, error) {
	f := &job.File{File: "command line"}
	if o.Config != "" {
		var err error
		if f, err = job.Load(o.Config); err != nil {
			return nil, err
		}
	}
	if o.Algorithm != "" {
		f.SetAlgorithmType(o.Algorithm)
	}
	f.Override("input", o.In)
	f.Override("output", o.Out)
	f.Override("metrics", o.Metrics)
	f.Override("prom", o.Prom)
	if o.HasSeed {
		f.Seed, f.HasSeed = o.Seed, true
	}
	return f, nil
}

// resolve resolves the file's algorithm and logs the warnings.
func resolve(o *Options, f *job.File) (*algorithm.Resolved, error) {
	res, err := f.Resolve()
	if err != nil {
		return nil, err
	}
	for _, w := range res.Warnings {
		fmt.Fprintln(o.Log, "warning: "+w)
	}
	if o.Verbose { // keys accepted for compatibility and ignored
		for _, w := range f.Warnings {
			fmt.Fprintln(o.Log, "note: "+w)
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

// prepareFile is `run --config FILE` / `--algorithm NAME`.
func prepareFile(o *Options) (*plan, error) {
	if o.AdvantageFn != "" || o.AddStrategy != "" {
		return nil, usagef("--advantage-fn and --add-strategy do not mix with --config/--algorithm (set advantage_fn in the job file)")
	}
	f, err := loadFile(o)
	if err != nil {
		return nil, err
	}
	j := runJob(o)
	if j.In, err = f.InputStore(); err != nil {
		return nil, err
	}
	if j.Out, err = f.OutputStore(); err != nil {
		return nil, err
	}
	if j.Metrics, j.Prom, err = f.Monitoring(); err != nil {
		return nil, err
	}
	j.Columns, j.Seed = f.Columns, f.Seed
	if j.OnInvalidReward == "" { // --on-invalid-reward overrides the file
		j.OnInvalidReward = f.OnInvalidReward
	}
	j.Label = fileLabel(f.File, f.Algorithm.AlgorithmType)
	if o.Config != "" {
		j.Reads = []string{o.Config}
	}
	p := &plan{job: j}
	p.complete = func(j *pipeline.Job) error {
		res, err := resolve(o, f)
		if err != nil {
			return err
		}
		if j.In == "" || j.Out == "" {
			return schema.BadInputf("a job needs an input and an output store (input:, output: or --in, --out; or a Trinity config's buffer.trainer_input.experience_buffer)")
		}
		j.Name = fmt.Sprintf("algorithm %s (%s)", res.Config.AlgorithmType, What(res))
		stale, err := stalenessOperator(res, o.Step, o.Log)
		if err != nil {
			return err
		}
		fileOps, skipped, err := f.RunOperators(o.SkipOperators)
		if err != nil {
			return err
		}
		for _, s := range skipped {
			fmt.Fprintln(o.Log, "warning: "+s)
		}
		ops, kvs, err := OperatorStage(fileOps, o.Operators, o.Args, stale...)
		if err != nil {
			return err
		}
		if j.Stages, err = Stages(res, kvs); err != nil {
			return err
		}
		if ops != nil { // upstream appends the advantage fn as the last operator
			j.Stages = append([]pipeline.Stage{ops}, j.Stages...)
		}
		if f.RolloutCorrection != nil {
			c, err := correction(f.RolloutCorrection)
			if err != nil {
				return err
			}
			if c != nil { // first: the rejection-sampled mask is the one advantages see
				j.Stages = append([]pipeline.Stage{pipeline.RolloutCorrection(c)}, j.Stages...)
			}
		}
		return nil
	}
	return p, p.shardOut(o)
}

// prepareLoss is `loss --fn NAME` or `loss --config FILE`/`--algorithm NAME`.
func prepareLoss(o *Options) (*plan, error) {
	j := &pipeline.Job{In: o.In, Out: o.GradOut, OutFlag: "--grad-out", Keep: idColumns, Metrics: o.Metrics, Prom: o.Prom}
	obj, err := lossObjective(o, j)
	if err != nil {
		return nil, err
	}
	if j.In == "" {
		return nil, usagef("give --in STORE")
	}
	cols, err := colMap(o.Cols)
	if err != nil {
		return nil, err
	}
	for name, col := range j.Columns { // the job file's columns of inputs; --col wins
		in := schema.InputName(name)
		if _, set := cols[in]; !set && isInput(in) {
			cols[in] = col
		}
	}
	device := o.Device
	if obj.Policy.Def.CPUOnly && device != "cpu" { // no device kernels: auto is the CPU, cuda refused
		if device == "cuda" {
			return nil, schema.BadInputf("policy loss %s has no device kernels: use --device cpu (or auto)", obj.Policy.Name())
		}
		device = "cpu"
	}
	ev, _, err := gpu.Select(device, o.Log)
	if err != nil {
		return nil, err
	}
	j.Objective, j.Name, j.Label = obj, obj.Policy.Name(), obj.Policy.Name()
	if o.Config != "" {
		j.Label = fileLabel(o.Config, j.Label)
	}
	j.Stages = []pipeline.Stage{pipeline.NewLoss(obj, ev, cols, o.Step)}
	p := &plan{job: j, complete: func(*pipeline.Job) error { return nil }}
	if o.Sharded { // the loss refuses it (a cross-batch stage), naming why
		s, err := newShard(o)
		if err != nil {
			return nil, err
		}
		j.Shard = &s
	}
	return p, nil
}

// lossObjective returns the objective of a loss: by flags (FlagObjective),
// else the resolved algorithm's, the job file then giving j its input
// (unless --in), monitoring files and Reads.
func lossObjective(o *Options, j *pipeline.Job) (*objective.Objective, error) {
	if !o.IsFile() {
		return FlagObjective(o)
	}
	f, err := loadFile(o)
	if err != nil {
		return nil, err
	}
	res, err := resolve(o, f)
	if err != nil {
		return nil, err
	}
	if j.In, err = f.InputStore(); err != nil { // --in, when given, is f.Input
		return nil, err
	}
	if j.Metrics, j.Prom, err = f.Monitoring(); err != nil {
		return nil, err
	}
	j.Columns = f.Columns
	if o.Config != "" {
		j.Reads = []string{o.Config}
	}
	return res.Objective()
}

func newShard(o *Options) (shard.Shard, error) {
	s, err := shard.New(o.Shards, o.ShardIndex)
	if err != nil {
		return s, usagef("%s", strings.TrimPrefix(err.Error(), "bad input: "))
	}
	return s, nil
}

// shardOut makes a sharded run's output the part of its shard in the
// directory of parts Out.
func (p *plan) shardOut(o *Options) error {
	if !o.Sharded {
		return nil
	}
	s, err := newShard(o)
	if err != nil {
		return err
	}
	out := p.job.Out
	if out == "" {
		return usagef("--shards needs --out DIR (the directory of the parts)")
	}
	if ext := filepath.Ext(out); ext != "" {
		if _, err := store.FormatOf(out); err == nil {
			return usagef("with --shards, --out is a directory of parts, not the store %s", out)
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
			return usagef("with --shards, --rejected is a directory of parts (REJ/part-I.parquet), not the store %s", schema.Redact(rej))
		}
		p.job.Rejected, p.job.RejectedParts = shard.PartPath(rej, s.I), rej
		p.job.Also = append(p.job.Also, store.Output{Flag: "the shard plan of --rejected", Path: shard.PlanPath(rej), Dir: rej})
	}
	return nil
}

// Execute builds the job the options ask for (FromFlags, FromConfig or
// FromAlgorithm) and runs it with the output handling every job shares:
//
//  1. every output (store, metrics, Prometheus file) is checked against
//     every input and each other (pipeline.Job.CheckOutputs) before
//     anything is written, so a refused job touches no file;
//  2. the missing directories of a run's output store (a sharded run's
//     directory of parts) and of the metrics and Prometheus files are made;
//  3. the store is written through a temp file and a rename (pipeline.Run);
//     a sharded run records its part's metrics (OUT/_metrics);
//  4. the metrics and Prometheus files are written, failed or not, with
//     the status gauges; status gives the exit status they report.
//
// The job is returned with the result, for messages.
func Execute(ctx context.Context, o *Options, status func(error) int) (*pipeline.Job, *pipeline.Result, error) {
	p, err := prepare(o)
	if err != nil {
		return nil, nil, err
	}
	j := p.job
	if err := j.CheckOutputs(ctx); err != nil {
		return j, nil, err
	}
	for _, path := range []string{j.Metrics, j.Prom} {
		if path == "" {
			continue
		}
		// Kept when the job fails: the file reports the failure.
		if _, err := makeDir(path); err != nil {
			return j, nil, err
		}
		if err := store.CheckWritable(path); err != nil {
			return j, nil, err
		}
	}
	start := time.Now()
	res, err := p.run(ctx, o)
	var m map[string]float64
	if res != nil {
		m = res.Metrics
	}
	out := Outcome{Label: j.Label, Metrics: m, ExitCode: status(err), Start: start, Duration: time.Since(start)}
	if werr := out.write(j.Metrics, j.Prom); err == nil {
		err = werr
	}
	return j, res, err
}

// run completes the job and runs it, making the directory of a run's
// output store.
func (p *plan) run(ctx context.Context, o *Options) (res *pipeline.Result, err error) {
	j := p.job
	if err := p.complete(j); err != nil {
		return nil, err
	}
	planID := ""
	var made []string // the directories made, removed again when the run fails
	defer func() {
		if err != nil { // err: the named result
			for i := len(made) - 1; i >= 0; i-- {
				os.Remove(made[i])
			}
		}
	}()
	if p.parts != "" {
		sp, perr := shard.NewPlan(p.shard.N, j.In, planSettings(o))
		if perr != nil {
			return nil, perr
		}
		// A directory of rejected parts is claimed as the directory of
		// parts is: same plan, same --replace.
		for _, d := range []struct{ dir, flag string }{{p.parts, "--out"}, {j.RejectedParts, "--rejected"}} {
			if d.dir == "" {
				continue
			}
			done, perr := shard.Claim(d.dir, d.flag, sp, o.Replace)
			if perr != nil {
				return nil, perr
			}
			defer func() { done(err != nil) }()
		}
		planID = sp.ID()
	} else if o.Command == Run && !trinity.IsURL(j.Out) {
		if made, err = makeDir(j.Out); err != nil {
			return nil, err
		}
	}
	if j.Rejected != "" && !trinity.IsURL(j.Rejected) {
		more, merr := makeDir(j.Rejected)
		made = append(made, more...)
		if merr != nil {
			return nil, merr
		}
	}
	if res, err = pipeline.Run(ctx, *j); err != nil {
		return nil, err
	}
	if p.shard != nil {
		part := shard.NewPart(*p.shard, j.Label, planID, res.In, res.Elapsed, res.Metrics, res.Weights)
		if err := part.Write(p.parts); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// planSettings are the settings of a sharded job its plan records
// (shard.Plan.Job): what the command line and job file choose.
func planSettings(o *Options) []string {
	s := []string{"command=" + o.Command}
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
	for _, op := range o.Operators {
		s = append(s, "operator "+op)
	}
	for _, op := range o.SkipOperators {
		s = append(s, "skip-operator "+op)
	}
	for _, a := range o.Args {
		s = append(s, "arg "+a)
	}
	if o.HasSeed {
		s = append(s, fmt.Sprintf("seed=%d", o.Seed))
	}
	return s
}

// makeDir makes the directory of an output file, returning the
// directories it made, outermost first.
func makeDir(path string) ([]string, error) {
	if objstore.IsURL(path) {
		return nil, nil // an object's prefix needs no making
	}
	var made []string
	for d := filepath.Dir(path); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil || d == filepath.Dir(d) {
			break
		}
		made = append([]string{d}, made...)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return nil, schema.Errorf(path, -1, "", "cannot make the output's directory: %v", pe.Err)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return made, nil
}
