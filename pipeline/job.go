package pipeline

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/rftpipe/rftpipe/pipeline/shard"
	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/stages/advantage"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/objective"
)

// Job is one run of the engine: a store, the stages it goes through, and
// where the result goes.
type Job struct {
	// In is the input store (file, directory or glob).
	In string
	// Out is the output store, its format taken from the extension; empty
	// for a job that writes no store (a loss without a gradient file).
	// OutFlag names it in messages (default --out).
	Out, OutFlag string
	// Also are the other files the job's command writes (a sharded run's
	// plan and part metrics): checked with the job's outputs.
	Also []store.Output
	// Rejected, when set, is a store of every row a stage dropped, as read
	// (all input columns, unchanged), with the columns drop_reason (why)
	// and dropped_by (the operator or fn that dropped it). The output store
	// is the same with or without it.
	Rejected string
	// OutParts and RejectedParts, in a sharded run, are the directories of
	// parts Out and Rejected are one part of (package shard): no other
	// output may lie inside them (store.Output.Dir).
	OutParts, RejectedParts string
	// Stages run in order over every record batch.
	Stages []Stage
	// Keep, when set, lists the only input columns written to the output
	// (those present); the stages' columns are written after them. nil
	// writes every input column.
	Keep []string
	// Columns maps a column name of rftpipe's vocabulary (schema) to the
	// store column holding it, for stores that name columns otherwise.
	// Trinity's and verl's names (schema.Aliases) are found without it.
	Columns map[string]string
	// InsideInput allows an output inside the input's directory, which a
	// later read of that directory would take for part of the store.
	InsideInput bool
	// Seed seeds every random choice (duplication, REC's balance drop, fresh
	// suffixes), so the same input and seed give a byte-identical output.
	Seed uint64
	// OnInvalidReward says what the group pass does with null, NaN or
	// infinite rewards: InvalidError (default) fails naming the first such
	// row, InvalidDrop drops those rows before any group forms (unless a
	// stage takes them: GroupNeeds.InvalidRewards).
	OnInvalidReward string
	// Parquet tunes the Parquet writer of the output.
	Parquet store.ParquetOptions
	// BatchRows is the number of rows per streamed record batch (0: default).
	BatchRows int
	// Progress, if set, is called with the number of rows of every batch
	// the streaming pass reads; Total, if set, with the number of rows of the
	// store, once known (after the group or a statistics pass).
	Progress func(rows int64)
	Total    func(rows int64)
	// Shard, when set, runs the job over the rows of one shard's batches
	// only (package shard); a stage that needs more than one batch
	// (Needs.CrossBatch) refuses it.
	Shard *shard.Shard

	// The rest describes the job to the code around Run (package builder),
	// which checks its outputs and monitors it.

	// Name says what the job computes, for messages ("grpo", "add strategy
	// random", "algorithm ppo (trainer-side advantage fn ppo)").
	Name string
	// Objective is the trainer objective a loss job evaluates (its stage is
	// among Stages); nil for other jobs.
	Objective *objective.Objective
	// Reads are the files the job reads besides its input store (its job
	// file): no output may land on one.
	Reads []string
	// Metrics and Prom are the files the job's metrics and status gauges
	// are written to, as JSON and in the Prometheus text format, also when
	// it fails; Label names the job in them. Empty: not written.
	Metrics, Prom, Label string
}

// Outputs returns every file the job writes: the output store and the
// monitoring files (empty paths left out).
func (j *Job) Outputs() []store.Output {
	var outs []store.Output
	outFlag := cmp.Or(j.OutFlag, "--out")
	for _, o := range append([]store.Output{{Flag: outFlag, Path: j.Out, Dir: j.OutParts}, {Flag: "--rejected", Path: j.Rejected, Dir: j.RejectedParts}, {Flag: "--metrics", Path: j.Metrics}, {Flag: "--prom", Path: j.Prom}}, j.Also...) {
		if o.Path != "" {
			outs = append(outs, o)
		}
	}
	return outs
}

// CheckOutputs applies rftpipe's rule for outputs (store.CheckOutputs) to
// every file the job writes against every file it reads.
func (j *Job) CheckOutputs(ctx context.Context) error {
	return store.CheckOutputs(ctx, append([]string{j.In}, j.Reads...), j.Outputs(), j.InsideInput)
}

// Invalid-reward policies.
const (
	InvalidError = "error"
	InvalidDrop  = "drop"
)

// DefaultBatchRows is the default number of rows per streamed batch. About
// four batches are in flight (read, shaped, queued, being encoded), so with
// 256-token rows 8192 keeps the pass well under 1 GiB of memory.
const DefaultBatchRows = 8192

// Result describes a finished job.
type Result struct {
	// In is the number of input rows; Out the number written, of which
	// Duplicated are copies. Filtered counts the rows a stage dropped and
	// InvalidDropped the rows the group pass dropped for an invalid reward.
	In, Out, Duplicated, Filtered, InvalidDropped int64
	// Rejected is the number of rows written to Job.Rejected.
	Rejected int64
	// Groups is the number of task groups (0 when no stage groups rows).
	Groups int
	// Metrics are the published metrics, under upstream's names.
	Metrics agg.Metrics
	// Weights gives, for the metrics that are means, the number of values
	// (groups, rows) each averages: what combines the metrics of the shards
	// of a job (package shard).
	Weights agg.Metrics
	// BytesRead is the number of bytes the Go reader read from the store's
	// Parquet files (streaming and statistics passes; DuckDB's group pass
	// reads on its own).
	BytesRead int64
	// Elapsed is the wall time of the whole job.
	Elapsed time.Duration
	// Warnings are the input's: rows it read but did not yield (a Trinity
	// 0.6 buffer's orphan rows), one line each; their counts are in Metrics.
	Warnings []string
}

// Stage is one step of a job. It declares what it reads and writes
// (Needs); the engine plans the passes over the store from the declarations
// of all stages and calls the hooks a stage implements: Preparer when the
// store is open, Grouper after the group pass, Observer in the statistics
// passes, Applier in the streaming pass, Finisher at the end. A stage value
// serves one Run.
type Stage interface {
	// Name names the stage in metrics and messages.
	Name() string
	// Needs declares the stage's columns and passes.
	Needs() Needs
}

// Needs is what a stage declares to the engine.
type Needs struct {
	// Columns must be in the store; Optional are read when present (names
	// of rftpipe's vocabulary).
	Columns, Optional []string
	// Group asks for the group pass, and what it must compute besides each
	// row's reward and task group.
	Group *GroupNeeds
	// Passes is the number of statistics passes (Observer) the stage needs
	// before the streaming pass, asked again after each pass (it may grow
	// with what a pass found); AllPasses takes part in every pass any stage
	// needs (a stage that prepares inputs for the stages after it).
	Passes int
	// PassColumns, when set, are the only columns its statistics passes
	// read (the loss's totals need the mask alone), with the columns of
	// PassInputs; else Columns and Optional.
	PassColumns []string
	// PassInputs are inputs its statistics passes read besides
	// PassColumns, each from the first of its columns the store has
	// (schema.Input.Columns): a fallback column is not read where the
	// store has the input's own.
	PassInputs []schema.Input
	// Writes are the columns the stage writes (replacing an input column of
	// that name, else appended). Duplicates says it may copy rows (the
	// output then has duplicate_of).
	Writes     []string
	Duplicates bool
	// Drops says the stage may drop rows.
	Drops bool
	// CrossBatch, when set, says why the stage's result for a row depends
	// on rows of other explore batches (a statistic over the whole store):
	// the job cannot be sharded.
	CrossBatch string
}

// AllPasses is Needs.Passes of a stage that runs in every statistics pass.
const AllPasses = -1

// GroupNeeds says what the group pass computes for a stage, besides each
// row's reward and its task group (tid = batch/task): what a pipeline-side
// advantage fn declares (advantage.Needs), plus what the store's schema
// tells once it is open.
type GroupNeeds struct {
	advantage.Needs
	// ComponentColumns are the store's reward components (reward_<name>),
	// read when Needs.Components is set.
	ComponentColumns []string
	// NoInfo says the store has no info column: every info key is absent.
	NoInfo bool
	// Operators asks for the experience operators' scalars (Operator).
	Operators bool
	Operator  OperatorNeeds
}

// Preparer is a stage whose needs depend on the store: Prepare is called
// once the store is open, before anything else, with the columns it has.
type Preparer interface {
	Stage
	Prepare(has func(name string) bool) error
}

// Grouper is a stage that uses the group pass.
type Grouper interface {
	Stage
	Group(g *Grouping) error
}

// Observer is a stage that needs statistics over the store before the
// streaming pass: Observe sees every record batch of pass p, in order.
type Observer interface {
	Stage
	Observe(pass int, b *Batch) error
}

// Applier is a stage of the streaming pass: it reads the batch's columns
// and sets its own (Batch.Set), drops rows (Batch.DropFor) or copies them
// (Batch.Copy).
type Applier interface {
	Stage
	Apply(b *Batch) error
}

// Completer is an Applier that can leave its work on a batch in flight when
// Apply returns (a device evaluation). When Deferred reports true, the
// engine holds each batch back after Apply: it applies the next batch to
// the stages up to this one first, then calls Complete for the held batch,
// which finishes the work and sets the batch's columns; the stages after
// this one then apply the batch, and it is written. So the stage's work on
// a batch overlaps the reading of the next and the stage's start of it,
// and the writing of a batch overlaps the work on the next. Batches are
// completed in order, one held at a time: the output is that of Apply doing
// all the work. When Deferred reports false, Apply does all the work and
// Complete is not called.
type Completer interface {
	Applier
	Deferred() bool
	Complete(b *Batch) error
}

// Finisher is a stage with results after the streaming pass: metrics and
// counts.
type Finisher interface {
	Stage
	Finish(res *Result) error
}

// check validates the job's own fields (not the store).
func (j *Job) check(ctx context.Context) error {
	switch {
	case j.In == "":
		return schema.BadInputf("no input store")
	case len(j.Stages) == 0:
		return schema.BadInputf("a job needs at least one stage")
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
	return j.CheckOutputs(ctx)
}

// WriteMetrics writes metrics as one JSON object, one key a line, keys
// sorted; non-finite values (which JSON cannot hold) are written as null.
func WriteMetrics(w io.Writer, m map[string]float64) error {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("{\n")
	for i, k := range keys {
		kj, _ := json.Marshal(k)
		v := "null"
		if f := m[k]; !math.IsNaN(f) && !math.IsInf(f, 0) {
			vj, _ := json.Marshal(f)
			v = string(vj)
		}
		fmt.Fprintf(&b, "  %s: %s", kj, v)
		if i < len(keys)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}
