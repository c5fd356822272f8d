package builder

import (
	"io"
	"strings"

	"github.com/rftpipe/rftpipe/pipeline/shard"
	"github.com/rftpipe/rftpipe/schema"
)

// Common are the options every job command shares: where the job comes
// from (flags, a job file, an algorithm type), its input, its monitoring
// files and its shard.
type Common struct {
	// Config is a job file; Algorithm an algorithm type (overriding the
	// file's). Neither: the job is by flags.
	Config, Algorithm string
	// In is the input store (a job file's input: when empty).
	In string
	// Metrics and Prom are the metrics (JSON) and Prometheus files, written
	// after every run that got past flag parsing, failed or not; Label is
	// their job label (default: the job file's name, else the algorithm or
	// fn).
	Metrics, Prom, Label string
	// Seed seeds the random choices (HasSeed: given).
	Seed    uint64
	HasSeed bool
	// Step is the training step: run, the trainer step about to run (what
	// staleness_control's predicate reads, 0 not given); loss, the step of
	// the batch (mix_chord's schedule).
	Step int64
	// Sharded runs shard ShardIndex of Shards: the output is then a
	// directory of parts, holding their plan (shard.Plan); Replace replaces
	// a directory of another plan whole instead of refusing it.
	Sharded            bool
	Shards, ShardIndex int
	Replace            bool
	// Verbose lists the job file's ignored keys on Log, where warnings go.
	Verbose bool
	Log     io.Writer
}

// byFile reports whether the options select a job file or an algorithm
// (else the job is by flags).
func (c *Common) byFile() bool { return c.Config != "" || c.Algorithm != "" }

// validate checks what the shared options say of each other.
func (c *Common) validate() error {
	if c.Replace && !c.Sharded {
		return schema.Usagef("--replace needs --shards N (a single output store is always replaced whole)")
	}
	if c.Sharded {
		if _, err := shard.New(c.Shards, c.ShardIndex); err != nil {
			return err
		}
	}
	return nil
}

// RunOptions are the options of `run`: advantages by an advantage fn, an
// add strategy, experience operators, a job file or an algorithm type.
type RunOptions struct {
	Common
	// AdvantageFn or AddStrategy, with Args (NAME=VALUE): a job by flags.
	// With a job file or algorithm, Args override the advantage fn's
	// arguments.
	AdvantageFn, AddStrategy string
	Args                     []string
	// Operators are experience operators (stages/operator) run in order
	// before the advantage fn; an arg NAME.key=value goes to the operator
	// NAME. A job file's data_processor operators run first.
	Operators []string
	// SkipOperators are operators of the job file not to run (by name), an
	// unknown one among them; each skipped one is reported on Log.
	SkipOperators []string
	// Out is the output store (a directory of parts when sharded); Rejected
	// the store of the rows the run drops (pipeline.Job).
	Out, Rejected string
	// OnInvalidReward (default: the job file's, else error), Codec and
	// InsideInput configure the run (pipeline.Job).
	OnInvalidReward, Codec string
	InsideInput            bool
	// SinceLast reads only the rows of the input table ingested since the
	// job's last successful run (table.SinceLast), and records the snapshot
	// read once the output is written.
	SinceLast bool
	// Progress and Total report progress (pipeline.Job).
	Progress, Total func(rows int64)
}

// validate checks the run's options before anything is read.
func (o *RunOptions) validate() error {
	if err := o.Common.validate(); err != nil {
		return err
	}
	if o.SinceLast && o.Sharded {
		return schema.Usagef("--since-last does not mix with --shards (one watermark per job)")
	}
	if o.byFile() {
		if o.AdvantageFn != "" || o.AddStrategy != "" {
			return schema.Usagef("--advantage-fn and --add-strategy do not mix with --config/--algorithm (set advantage_fn in the job file)")
		}
		return nil
	}
	if len(o.SkipOperators) > 0 {
		return schema.Usagef("--skip-operator skips an operator of a job file (--config)")
	}
	fn, strategy := o.AdvantageFn, o.AddStrategy
	if fn != "" && strategy != "" || fn == "" && strategy == "" && len(o.Operators) == 0 {
		return schema.Usagef("give exactly one of --advantage-fn and --add-strategy, or --operator")
	}
	return nil
}

// LossOptions are the options of `loss`: a trainer objective over a store
// as one batch, by flags (Fn and the terms) or by a job file or algorithm.
type LossOptions struct {
	Common
	// Fn is the policy loss with Args (NAME=VALUE) over its default_args.
	Fn   string
	Args []string
	// The loss's terms: loss_agg_mode, KL loss fn (default none) and
	// coefficient, entropy loss fn (default default) and coefficient.
	LossAggMode, KLLossFn, EntropyLossFn string
	KLCoef, EntropyCoef                  float64
	// Given names the objective's flags the command line set (fn, arg,
	// loss-agg-mode, kl-loss-fn, kl-coef, entropy-loss-fn, entropy-coef): a
	// job file's or algorithm's objective takes none of them.
	Given []string
	// Cols map the loss's inputs to store columns (INPUT=COLUMN).
	Cols []string
	// Device evaluates the kernels (gpu.Select); GradOut is the gradient
	// file.
	Device, GradOut string
}

// validate checks the loss's options before anything is read.
func (o *LossOptions) validate() error {
	if err := o.Common.validate(); err != nil {
		return err
	}
	if o.byFile() {
		if len(o.Given) > 0 {
			return schema.Usagef("--%s does not mix with --config/--algorithm (set it in the job file's algorithm section)", o.Given[0])
		}
		return nil
	}
	if o.Fn == "" {
		return schema.Usagef("give --fn, --algorithm or --config")
	}
	return nil
}

// label returns the options' label, else def.
func label(o *Common, def string) string {
	if o.Label != "" {
		return o.Label
	}
	return def
}

// argsOf returns the settings a sharded run's plan records of kvs, each
// prefixed ("arg a=b").
func argsOf(prefix string, kvs []string) []string {
	out := make([]string, len(kvs))
	for i, kv := range kvs {
		out[i] = strings.TrimSpace(prefix + " " + kv)
	}
	return out
}
