// Package pipeline runs an advantage job over an experience store, in one
// streaming pass, the way Trinity-RFT's experience pipeline runs its
// pipeline-side advantage fn — but over a columnar store on disk instead of a
// list of objects in memory.
//
// Reading run.go top to bottom tells the whole story of a job:
//
//  1. open the input store and check it has the columns the fn needs;
//  2. group pass: DuckDB reads the store's scalar columns itself
//     (sql/pipeline/*.sql) and returns, per row, the reward and the dense
//     first-appearance index of its task group (and of its run group, and the
//     mean log-prob, when the fn needs them); the advantage stage turns those
//     into a Plan (keep flag and score per row, duplicate blocks, metrics);
//  3. one streaming pass over the record batches: validate, drop the rows the
//     plan drops, write advantages = returns = score × action_mask, set aside
//     the copies of duplicated rows;
//  4. write the output store atomically (temp file + rename, never over an
//     input), the duplicated rows last;
//  5. metrics under upstream's names, and a one-line summary.
//
// # Output order
//
// Rows keep INPUT order: the rows a filter drops are left out, the others are
// written in the order they were read. Upstream returns the rows of a batch
// group by group (first-appearance order), so its order differs; experiences
// are identified by their eid, which is how the conformance runner compares
// them. Duplicated rows (grpo's duplicate_experiences) come after every
// original row, ordered by the input row they copy (a row drawn k times is
// copied k times in a row); each copy gets a fresh seeded suffix, so every uid
// stays unique, and duplicate_of = the store row index of the row it copies
// (null on original rows). Upstream keeps the eid of copies unchanged;
// tid, rid and sid — what grouping reads — are unchanged here too.
//
// # The store is one batch
//
// Upstream runs the fn once per explore step. Here the whole store is one
// Input: groups are the same (a tid contains the batch id), but
// std_cal_level=batch takes the std over the whole store, duplication draws
// copies from every kept group of the store, and metrics are gathered over
// all groups of the store. To get per-step behaviour, run once per batch
// (e.g. a store per explore step).
//
// # Formats
//
// The input may be Parquet, Arrow IPC or JSONL (a file, a directory or a
// glob). DuckDB reads Parquet itself; for any other format the group pass
// first copies the few scalar columns it needs into a temporary Parquet file
// (the token columns never), while the streaming pass reads the original.
package pipeline

import (
	"fmt"
	"time"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/stages/addstrategy"
	"github.com/rftpipe/rftpipe/stages/advantage"
	"github.com/rftpipe/rftpipe/stages/agg"
)

// Job is everything one run needs; `rftpipe run` fills it from flags, and an
// algorithm preset may fill it from a config.
type Job struct {
	// In is the input store (file, directory or glob); Out the output file,
	// its format taken from the extension.
	In, Out string
	// AdvantageFn is the name of a pipeline-side advantage fn or filter of
	// Registry (grpo, step_wise_grpo, opmd, asymre, rec, reinforce,
	// reward_std_filter, invalid_reward_filter).
	AdvantageFn string
	// AddStrategy, instead of AdvantageFn, names one of the six add
	// strategies of the removed upstream design (stages/addstrategy: grpo,
	// opmd, step_wise_grpo, reward_variance, correct_bias,
	// duplicate_informative), run as presets with their own semantics.
	AddStrategy string
	// Args are the fn's (or strategy's) args, typed (SetArgs parses
	// command-line strings). nil means upstream's default_args(); in a non-nil
	// map, missing args take the constructor defaults, as upstream.
	Args map[string]any
	// Seed seeds every random choice (duplication, REC's balance drop), so the
	// same input and seed give a byte-identical output store.
	Seed uint64
	// OnInvalidReward says what to do with null, NaN or infinite rewards:
	// "error" (default) fails naming the first such row, "drop" drops those
	// rows before any group forms (upstream's invalid_reward_filter).
	OnInvalidReward string
	// Parquet tunes the Parquet writer of the output.
	Parquet store.ParquetOptions
	// BatchRows is the number of rows per streamed record batch (0: default).
	BatchRows int
	// Registry resolves AdvantageFn (nil: advantage.Default()); add
	// strategies come from addstrategy.Default().
	Registry *advantage.Registry
	// Progress, if set, is called with the number of rows of every batch read.
	Progress func(rows int64)
}

// DefaultBatchRows is the default number of rows per streamed batch. About
// four batches are in flight (read, shaped, queued, being encoded), so with
// 256-token rows 8192 keeps the pass well under 1 GiB of memory.
const DefaultBatchRows = 8192

// HeapLimit is the soft limit on the Go heap for a process that streams a
// store (the rftpipe commands run, gen and convert set it, unless GOMEMLIMIT
// sets another). The collector then works harder near it instead of letting
// the heap grow to twice its live size: the live heap of a run is the batches
// in flight plus a few bytes of group statistics per row (~0.35 GiB at 1M
// rows, ~0.55 GiB at 10M), so the limit keeps the RSS of a 10M-row GRPO run
// with duplication under 1 GiB, where it would reach ~1.8 GiB.
const HeapLimit = 768 << 20

// Invalid-reward policies.
const (
	InvalidError = "error"
	InvalidDrop  = "drop"
)

// Result describes a finished run.
type Result struct {
	// In is the number of input rows; Out the number written, of which
	// Duplicated are copies. Filtered counts the rows the fn dropped and
	// InvalidDropped the rows dropped for an invalid reward.
	In, Out, Duplicated, Filtered, InvalidDropped int64
	// Groups is the number of task groups.
	Groups int
	// Metrics are the published metrics, under upstream's names
	// (experience_pipeline/…, time/experience_pipeline/…).
	Metrics agg.Metrics
	// Elapsed is the wall time of the whole run.
	Elapsed time.Duration
}

// SetArgs parses command-line "name=value" args with the arg schema of the
// job's fn (or add strategy) into Args, replacing them; no args leaves Args
// as they are (nil: upstream's default_args()).
func (j *Job) SetArgs(kvs []string) error {
	if len(kvs) == 0 {
		return nil
	}
	reg, name := j.registry()
	spec, err := reg.Get(name)
	if err != nil {
		return err
	}
	vals, err := spec.Params.ParseKV(kvs)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	j.Args = vals
	return nil
}

// registry returns the registry holding the job's stage, and its name there.
func (j *Job) registry() (*advantage.Registry, string) {
	switch {
	case j.AddStrategy != "":
		return addstrategy.Default(), j.AddStrategy
	case j.Registry != nil:
		return j.Registry, j.AdvantageFn
	}
	return advantage.Default(), j.AdvantageFn
}

// stage builds the job's pipeline-side stage and says what it reads.
func (j *Job) stage() (advantage.PipelineFn, needs, error) {
	reg, name := j.registry()
	fn, err := reg.Pipeline(name, j.Args)
	if err != nil {
		return nil, needs{}, err
	}
	if j.AddStrategy != "" {
		// A Strategy hides its stage; these two read more than rewards.
		return fn, needs{runs: j.AddStrategy == "step_wise_grpo", logprobMean: j.AddStrategy == "correct_bias"}, nil
	}
	return fn, needsOf(fn), nil
}

// name returns the stage's name for metrics and messages.
func (j *Job) name() string {
	if j.AddStrategy != "" {
		return "add_strategy/" + j.AddStrategy
	}
	return j.AdvantageFn
}

// check validates the job's own fields (not the store).
func (j *Job) check() error {
	switch {
	case j.In == "":
		return schema.BadInputf("no input store")
	case j.Out == "":
		return schema.BadInputf("no output store")
	case (j.AdvantageFn == "") == (j.AddStrategy == ""):
		return schema.BadInputf("give exactly one of an advantage fn and an add strategy")
	}
	switch j.OnInvalidReward {
	case "":
		j.OnInvalidReward = InvalidError
	case InvalidError, InvalidDrop:
	default:
		return schema.BadInputf("on-invalid-reward must be %s or %s, not %q", InvalidError, InvalidDrop, j.OnInvalidReward)
	}
	if j.BatchRows <= 0 {
		j.BatchRows = DefaultBatchRows
	}
	return nil
}
