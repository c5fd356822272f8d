// Package pipeline is rftpipe's one engine: every command that reads an
// experience store and writes results (`rftpipe run` in all its modes,
// `rftpipe loss`) runs a Job through Run. A job is a store, a list of
// stages and an output:
//
//	read the columns the stages declare → group pass → statistics passes
//	→ streaming pass through every stage → write → results
//
// # Entry points
//
// cmd/rftpipe maps flags to one options type per command of package
// build and prints; build is the one place that makes a Job and runs it:
//
//	builder.Run   run's options (an advantage fn, add strategy, operators,
//	            a job file or an algorithm type) → Job → Run
//	builder.Loss  loss's options (a policy loss by flags, or a job file's or
//	            algorithm's objective) → Job → Run
//
// Both resolve the options, check the outputs against the inputs
// (Job.CheckOutputs), build the stages, Run, and write the metrics and
// Prometheus files, failed or not.
//
// The files of this package, in the order Run uses them:
//
//	job.go        Job, Stage and its hooks, Result; Job.check
//	run.go        Run: the passes, top to bottom; the statistics passes
//	stream.go     the streaming pass: read, stages, shaping and writing,
//	              each on goroutines of its own
//	groups.go     the group pass (DuckDB; sql/pipeline/*.sql) → Grouping
//	sharded.go    the group pass and reads of one shard's batches
//	batch.go      Batch: a record batch as the stages see it
//	shape.go      the output's columns and a batch's shaping into them
//	defer.go      the deferred streaming read: untouched columns' chunks
//	              copied from the input, not decoded (the main speed-up)
//	plan.go       PipelineSide: a pipeline-side advantage fn's stages
//	trainer.go    TrainerSide: a trainer-side fn (and KL penalty) streamed
//	correction.go RolloutCorrection: verl's rollout correction, decoupled
//	check.go      Check: a job that computes nothing checks the store
//	loss.go       LossStage: the trainer's objective, dLoss/dlogprob
//
// # Stages
//
// A Stage declares what it reads and writes (Needs): the columns it
// requires or reads when present, whether it needs the group pass and how
// many statistics passes, the columns it writes and whether it copies rows.
// The engine plans the passes from those declarations alone and knows no
// stage by name or type; it calls the hooks a stage implements:
//
//   - Preparer, once the store is open (needs that depend on its columns);
//   - Grouper, after the group pass: DuckDB reads the scalar columns itself
//     (sql/pipeline/*.sql) and gives, per row, the reward and the dense
//     first-appearance index of its task group (and of its run group, its
//     step, its mean log-prob, when a stage asks) — a Grouping;
//   - Observer, in each statistics pass: the store is read again, only the
//     columns the observing stages declare, for what must be known about the
//     whole store before any row is written (whitening moments, group
//     baselines from token sums, a loss's row and token totals);
//   - Applier, in the streaming pass: each record batch (a Batch) goes
//     through every stage in order; a stage reads input columns (decoded
//     token lists with Batch.Tokens), sets output columns (Batch.Set,
//     SetList), drops rows (DropFor) or copies them (Copy); a Completer
//     (the loss on a device) may leave its work on a batch in flight until
//     the next batch has been applied up to it, completing batches in order;
//   - Finisher, at the end: metrics and counts into the Result.
//
// Rows keep input order; dropped rows are left out; copied rows come after
// every original row, ordered by the row they copy, with a fresh seeded
// suffix and duplicate_of = the store row they copy. The output is written
// atomically (a temp file renamed into place, never over an input); copies
// wait in a spill store until the originals are written. Reading, the
// stages, shaping and encoding run on goroutines of their own, so they
// overlap; the reader decodes several row groups at once and the writer
// encodes several ahead, both in the store's order. Batches of
// 8192 rows stream through: memory does not grow with the store, apart from
// a few bytes per row of group statistics.
//
// # Two jobs, planned
//
// A pipeline-side job — `rftpipe run --advantage-fn grpo` — is
// PipelineSide(fn): a plan stage (Grouper: the fn's Plan over the group
// pass's Input gives each row's keep flag and score and the duplicate
// blocks) and three steps that carry the plan out batch by batch: filter
// (DropFor), advantage (advantages = returns = score × action_mask) and
// duplicate (Copy). Passes: the group pass, then the streaming pass.
//
// A trainer-side job — `rftpipe run --algorithm rloo` — is TrainerSide(fn,
// penalty): a scores stage building each batch's token-level rewards
// (token_level_reward, else the reward at the last response token, less
// the KL penalty when kl_penalty_fn is set) and the fn's streamed form
// (stages/advantage.Streamed). rloo's group baselines need every row's
// summed reward first: on outcome rewards that is the group pass's reward
// (no statistics pass at all, and each row's score goes straight onto its
// action_mask bits, as grpo's does), otherwise one statistics pass sums the
// token-level rewards of every row. reinforceplusplus and ppo whiten over
// the whole store: one statistics pass gathers the masked moments batch by
// batch, combined exactly, and the streaming pass writes the whitened
// advantages.
//
// The loss step (LossStage, `rftpipe loss`) is the trainer's objective
// (stages/objective) over the store as one batch: one statistics pass for
// its totals, then the streaming pass adds up the terms' sums and writes
// dLoss/dlogprob as it goes (a loss whose gradient needs the batch's sums,
// dpo, takes a second statistics pass).
//
// # Columns
//
// Stages name columns in rftpipe's vocabulary (schema: logprobs, logprob,
// old_logprob, ref_logprob, values, entropy, …); Trinity's and verl's
// names (schema.Aliases) and the job's Columns mapping resolve to the
// store's. A bad row is located by its file and its row within that file on
// every path.
//
// # Shards
//
// A job with a Shard runs over the rows of one shard's explore batches
// (package shard): the group pass and every read see only those rows (row
// groups that cannot hold them are skipped), Batch.Row counts them, and the
// stages compute as over a store of those rows alone. A stage whose result
// depends on rows of other batches says why in Needs.CrossBatch, and the
// engine refuses to shard the job.
//
// # Formats
//
// The input may be Parquet, Arrow IPC, JSONL or a Trinity SQL buffer (a
// file, a directory, a glob or a database URL). DuckDB reads Parquet
// itself; for any other format the group pass first copies the few scalar
// columns it needs into a temporary Parquet file (the token columns never).
package pipeline
