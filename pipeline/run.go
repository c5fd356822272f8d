package pipeline

import (
	"cmp"
	"context"
	"os"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"golang.org/x/sync/errgroup"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/stages/agg"
)

// Run runs job: see the package documentation for the passes. On any error
// nothing is left at job.Out (an existing file there is untouched) and the
// input is never modified.
func Run(ctx context.Context, job Job) (*Result, error) {
	start := time.Now()
	if err := job.check(ctx); err != nil {
		return nil, err
	}

	// 1. Open the store; check its files agree on their columns before any
	// stage sees a row (a stage's own refusal must not race the reader's);
	// check the columns the stages declare.
	r, err := store.Open(job.In, job.readOptions(store.Context(ctx))...)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if files := r.Files(); len(files) > 1 {
		if err := store.CheckSameColumns(files); err != nil {
			return nil, err
		}
	}
	cols := newColumns(r.Files()[0], r.Schema(), job.Columns)
	if err := prepare(&job, cols); err != nil {
		return nil, err
	}
	tmp, err := store.TempDir()
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	res := &Result{Metrics: agg.Metrics{}, Weights: agg.Metrics{}}

	// 2. Group pass, when a stage asks for it.
	g, err := grouping(ctx, &job, r, cols, tmp, res)
	if err != nil {
		return nil, err
	}
	if err := checkTrainerAfter(job.Stages); err != nil {
		return nil, err
	}

	// 3. Statistics passes, when a stage needs them.
	total, err := observeAll(ctx, &job, cols, g, res)
	if err != nil {
		return nil, err
	}

	// 4. The streaming pass.
	streamTime, err := stream(ctx, &job, r, cols, g, tmp, total, res)
	if err != nil {
		return nil, err
	}

	// 5. Results.
	if err := finish(&job, res, start, streamTime); err != nil {
		return nil, err
	}
	return res, nil
}

// prepare lets the stages fit their needs to the store's columns
// (Preparer), then checks the store has the columns they declare and the
// job can be sharded.
func prepare(job *Job, cols *columns) error {
	for _, st := range job.Stages {
		if p, ok := st.(Preparer); ok {
			if err := p.Prepare(cols.has); err != nil {
				return err
			}
		}
	}
	for _, st := range job.Stages {
		if err := cols.require(st.Needs().Columns...); err != nil {
			return err
		}
	}
	return checkShardable(job)
}

// grouping runs the group pass when a stage asks for it: DuckDB reads the
// scalar columns and groups the rows. It applies job.OnInvalidReward to
// the invalid rewards and gives the Grouping to the stages (Grouper); a
// nil Grouping: no stage asked.
func grouping(ctx context.Context, job *Job, r *store.Reader, cols *columns, tmp string, res *Result) (*Grouping, error) {
	gn, ok := groupNeeds(job.Stages)
	if !ok {
		return nil, nil
	}
	if gn.Components {
		gn.ComponentColumns = rewardComponents(r.Schema())
	}
	gn.NoInfo = !cols.has(schema.Info)
	gn.Operator.NoMetrics, gn.Operator.NoTruncateStatus = !cols.has(schema.Metrics), !cols.has(schema.TruncateStatus)
	var g *Grouping
	var err error
	pprof.Do(ctx, pprof.Labels("step", "group"), func(ctx context.Context) {
		g, err = groupPass(ctx, job.In, r.Files(), gn, cols, job.Shard, tmp)
	})
	if err != nil {
		return nil, err
	}
	switch {
	case gn.InvalidRewards:
	case g.Invalid > 0 && job.OnInvalidReward == InvalidError:
		return nil, locateRow(job.In, g.FirstInvalid, schema.ValidateOptions{RequireReward: true}, func(file string, row int64) error {
			return schema.Errorf(file, row, cols.name(schema.Reward), "invalid reward (use --on-invalid-reward drop to drop such rows)")
		})
	case job.OnInvalidReward == InvalidDrop:
		res.InvalidDropped = g.Invalid
		// Upstream's invalid_reward_filter operator reports its count.
		res.Metrics["experience_pipeline/invalid_reward_filter/filtered_count"] = float64(g.Invalid)
	}
	g.Input.Seed = job.Seed
	res.Groups = g.Input.Tasks.Len()
	for _, st := range job.Stages {
		if gr, ok := st.(Grouper); ok {
			if err := gr.Group(g); err != nil {
				return nil, err
			}
		}
	}
	return g, nil
}

// observeAll runs the statistics passes the stages need (observe), the
// store read once per pass, and reports the store's rows to job.Total when
// they are known. It returns them; -1: not known before the streaming pass.
func observeAll(ctx context.Context, job *Job, cols *columns, g *Grouping, res *Result) (int64, error) {
	total := int64(-1)
	if g != nil {
		total = g.Rows
	}
	var err error
	for p := 0; p < observePasses(job.Stages); p++ {
		if total, err = observe(ctx, job, p, cols, g, res); err != nil {
			return 0, err
		}
	}
	if job.Total != nil && total >= 0 {
		job.Total(total)
	}
	return total, nil
}

// stream runs the streaming pass: every batch through every stage, into
// the output store; copied rows go to a spill store appended at the end.
// It records the rows and the reader's bytes, warnings and counts in res,
// checks the rows against the total the earlier passes read (-1: none),
// and returns the time the pass took before its commit.
func stream(ctx context.Context, job *Job, r *store.Reader, cols *columns, g *Grouping, tmp string, total int64, res *Result) (time.Duration, error) {
	s, err := newStreamer(ctx, job, r, cols, g, tmp)
	if err != nil {
		return 0, err
	}
	defer s.abort()
	streamStart := time.Now()
	if err := s.run(ctx, r); err != nil {
		return 0, err
	}
	streamTime := time.Since(streamStart)
	pprof.Do(ctx, pprof.Labels("step", "commit"), func(ctx context.Context) { err = s.commit(ctx) })
	if err != nil {
		return 0, err
	}
	res.In, res.Out, res.Duplicated, res.Rejected = s.rows, s.written, s.copied, s.rejectedRows
	res.BytesRead += r.BytesRead()
	read := r // the reader of the streaming pass: its warnings and counts
	if s.pass != nil {
		read = s.pass
		res.BytesRead += s.pass.BytesRead()
	}
	res.Warnings = read.Warnings()
	for name, n := range read.Counts() {
		res.Metrics[name] = float64(n)
	}
	if total >= 0 && s.rows != total {
		return 0, schema.Errorf(job.In, -1, "", "the store changed while it was read: %d rows, then %d", total, s.rows)
	}
	return streamTime, nil
}

// finish lets the stages add their results (Finisher) and, when an
// experience store was written, adds the write's count and times.
func finish(job *Job, res *Result, start time.Time, streamTime time.Duration) error {
	for _, st := range job.Stages {
		if f, ok := st.(Finisher); ok {
			if err := f.Finish(res); err != nil {
				return err
			}
		}
	}
	res.Elapsed = time.Since(start)
	if job.Out != "" && job.Keep == nil { // an experience store was written
		res.Metrics["experience_pipeline/experience_count"] = float64(res.Out)
		res.Metrics["time/experience_pipeline/write"] = streamTime.Seconds()
		res.Metrics["time/experience_pipeline/total"] = res.Elapsed.Seconds()
	}
	return nil
}

// groupNeeds merges the stages' group-pass needs; ok is false when no stage
// asks for the pass.
func groupNeeds(stages []Stage) (GroupNeeds, bool) {
	var out GroupNeeds
	ok := false
	for _, st := range stages {
		if n := st.Needs().Group; n != nil {
			ok = true
			out.Runs = out.Runs || n.Runs
			out.Step = out.Step || n.Step
			out.LogprobMean = out.LogprobMean || n.LogprobMean
			out.InvalidRewards = out.InvalidRewards || n.InvalidRewards
			out.StepReward = cmp.Or(out.StepReward, n.StepReward)
			out.Anchor = cmp.Or(out.Anchor, n.Anchor)
			out.Components = out.Components || n.Components
			out.CoD = out.CoD || n.CoD
			if n.Operators {
				out.Operators = true
				for _, m := range n.Operator.Metrics {
					if !slices.Contains(out.Operator.Metrics, m) {
						out.Operator.Metrics = append(out.Operator.Metrics, m)
					}
				}
				out.Operator.Truncated = out.Operator.Truncated || n.Operator.Truncated
				out.Operator.ResponseLength = out.Operator.ResponseLength || n.Operator.ResponseLength
				out.Operator.ReturnsNorm = out.Operator.ReturnsNorm || n.Operator.ReturnsNorm
				out.Operator.ModelVersion = out.Operator.ModelVersion || n.Operator.ModelVersion
			}
		}
	}
	return out, ok
}

// observePasses returns the number of statistics passes the stages need.
func observePasses(stages []Stage) int {
	n := 0
	for _, st := range stages {
		if _, ok := st.(Observer); ok {
			n = max(n, st.Needs().Passes)
		}
	}
	return n
}

// observing reports whether stage st takes part in statistics pass p.
func observing(st Stage, p int) (Observer, bool) {
	o, ok := st.(Observer)
	if !ok {
		return nil, false
	}
	n := st.Needs().Passes
	return o, n == AllPasses || p < n
}

// observe runs statistics pass p: the observing stages see every batch,
// read with only the columns they declare (named as in the store, whose
// columns are all). It returns the rows read.
func observe(ctx context.Context, job *Job, p int, all *columns, g *Grouping, res *Result) (int64, error) {
	want := []string{schema.ActionMask} // the response layout (Batch.Rows)
	if all.lookup(schema.ActionMask) < 0 {
		want = append(want, schema.Logprobs) // the layout without a mask
	}
	if job.Shard != nil {
		want = append(want, schema.Batch)
	}
	for _, st := range job.Stages {
		if _, ok := observing(st, p); ok {
			n := st.Needs()
			if n.PassColumns != nil {
				want = append(want, n.PassColumns...)
				for _, in := range n.PassInputs {
					if i := slices.IndexFunc(in.Columns(), all.has); i >= 0 {
						want = append(want, in.Columns()[i])
					}
				}
			} else {
				want = append(append(want, n.Columns...), n.Optional...)
			}
		}
	}
	var names []string
	for _, w := range want {
		if i := all.lookup(w); i >= 0 {
			names = append(names, all.sch.Field(i).Name)
		}
	}
	r, err := store.Open(job.In, job.readOptions(store.Columns(names...))...)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	cols := newColumns(r.Files()[0], r.Schema(), job.Columns)
	bt := newBatcher(job, cols, r.Schema())
	// Reading (decoding) and observing overlap: one batch is read ahead.
	ahead := make(chan *Batch, 1)
	eg, ectx := errgroup.WithContext(ctx)
	step := labelled(ectx, eg)
	step("observe-read", func() error {
		defer close(ahead)
		return r.ForEach(ectx, func(rec arrow.Record) error {
			file, fileRow, _ := r.Pos()
			b, err := bt.batch(rec, nil, file, fileRow)
			if b == nil || err != nil {
				return err
			}
			select {
			case ahead <- b:
				return nil
			case <-ectx.Done():
				b.rec.Release()
				return ectx.Err()
			}
		})
	})
	var rows int64
	step("observe", func() error {
		for b := range ahead {
			n, err := observeBatch(job, p, b)
			rows += n
			if err != nil {
				for b := range ahead {
					b.rec.Release()
				}
				return err
			}
		}
		return nil
	})
	err = eg.Wait()
	if err == nil && g != nil && rows != g.Rows {
		err = schema.Errorf(job.In, -1, "", "the store changed while it was read: %d rows, then %d", g.Rows, rows)
	}
	res.BytesRead += r.BytesRead()
	return rows, err
}

// observeBatch runs the stages observing pass p over one batch, which it
// releases, and returns its rows.
func observeBatch(job *Job, p int, b *Batch) (int64, error) {
	defer b.rec.Release()
	if err := b.validate(); err != nil {
		return 0, err
	}
	defer b.release()
	for _, st := range job.Stages {
		if o, ok := observing(st, p); ok {
			if err := o.Observe(p, b); err != nil {
				return 0, err
			}
		}
	}
	return int64(b.Len()), nil
}
