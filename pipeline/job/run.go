package job

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/apache/arrow/go/v17/arrow/array"

	"github.com/rftpipe/rftpipe/pipeline"
	"github.com/rftpipe/rftpipe/pipeline/algorithm"
	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/stages/agg"
)

// RunOptions are the settings of a run that are not in a job file.
type RunOptions struct {
	// OnInvalidReward, Parquet and Progress are passed to pipeline.Job.
	OnInvalidReward string
	Parquet         store.ParquetOptions
	Progress        func(rows int64)
}

// What says what Run does for a resolved algorithm.
func What(res *algorithm.Resolved) string {
	f, adv := res.Type.Flags(), res.Config.Fn(algorithm.AdvantageFn)
	switch {
	case f.Schema != algorithm.Experience:
		return fmt.Sprintf("check the %s store and pass its rows through", f.Schema)
	case adv == algorithm.NoAdvantage:
		return "check the experience store and pass its rows through (no advantage fn)"
	case f.ComputeAdvantageInTrainer:
		return "trainer-side advantage fn " + adv
	default:
		return "pipeline-side advantage fn " + adv
	}
}

// Run runs what an algorithm computes outside the trainer over the job's
// input store, writing the job's output store:
//
//   - experience algorithms with a pipeline-side advantage fn (grpo, opmd,
//     …): the fn as the experience pipeline's last operator (pipeline.Run);
//     kl_penalty_fn has no effect there (quirk Q-10);
//   - compute_advantage_in_trainer algorithms (ppo, rloo, …): the KL penalty
//     (if configured) and the trainer-side fn over the whole store as one
//     trainer batch (PPO's GAE needs a values column);
//   - sft and dpo schemas, and experience algorithms without an advantage
//     (raft): the store's shape is checked and every row passes through.
//
// Metrics use upstream's names.
func Run(ctx context.Context, j *Job, res *algorithm.Resolved, opt RunOptions) (*pipeline.Result, error) {
	if j.Input == "" || j.Output == "" {
		return nil, schema.BadInputf("a job needs an input and an output store (input:, output: or --in, --out)")
	}
	start := time.Now()
	f, adv := res.Type.Flags(), res.Config.Fn(algorithm.AdvantageFn)
	var out *pipeline.Result
	var err error
	switch {
	case f.Schema != algorithm.Experience || adv == algorithm.NoAdvantage:
		out, err = passThrough(ctx, j, f.Schema)
	case f.ComputeAdvantageInTrainer:
		out, err = runTrainerSide(ctx, j, res)
	default:
		if len(j.Columns) > 0 {
			return nil, &Error{File: j.File, Line: j.lines["columns"], Key: "columns",
				Msg: "the pipeline-side run reads rftpipe's column names; rename the store's columns instead"}
		}
		return pipeline.Run(ctx, pipeline.Job{
			In: j.Input, Out: j.Output, AdvantageFn: adv, Args: res.Config.Args(algorithm.AdvantageFn),
			Seed: j.Seed, OnInvalidReward: opt.OnInvalidReward, Parquet: opt.Parquet, Progress: opt.Progress,
		})
	}
	if err != nil {
		return nil, err
	}
	out.Metrics["experience_pipeline/experience_count"] = float64(out.Out)
	out.Elapsed = time.Since(start)
	return out, nil
}

// shapeColumns are the columns each non-experience schema requires.
var shapeColumns = map[algorithm.Schema][]string{
	algorithm.SFT:        {schema.Tokens, schema.PromptLength},
	algorithm.DPO:        {schema.Tokens, schema.Chosen, schema.Rejected},
	algorithm.Experience: {schema.Tokens, schema.PromptLength, schema.ActionMask},
}

// passThrough checks the store's shape for the schema and copies it.
func passThrough(ctx context.Context, j *Job, sch algorithm.Schema) (*pipeline.Result, error) {
	r, err := store.Open(j.Input)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	need := make([]string, len(shapeColumns[sch]))
	for i, c := range shapeColumns[sch] {
		need[i] = j.storeName(c)
	}
	if err := schema.Require(j.Input, r.Schema(), need...); err != nil {
		return nil, fmt.Errorf("%s algorithm: %w", sch, err)
	}
	var n int64
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		file, _, first := r.Pos()
		if err := schema.Validate(file, first, rec, schema.ValidateOptions{AllowInvalidReward: true}); err != nil {
			return nil, err
		}
		if sch == algorithm.DPO {
			for _, c := range []string{schema.Chosen, schema.Rejected} {
				l := rec.Column(rec.Schema().FieldIndices(j.storeName(c))[0]).(array.ListLike)
				for i := 0; i < int(rec.NumRows()); i++ {
					if lo, hi := l.ValueOffsets(i); l.IsNull(i) || hi == lo {
						return nil, schema.Errorf(file, first+int64(i), c, "DPO needs a non-empty %s answer on every row", c)
					}
				}
			}
		}
		n += rec.NumRows()
	}
	written, err := rewrite(ctx, j, func(string) []float64 { return nil }, agg.Rows{})
	if err != nil {
		return nil, err
	}
	return &pipeline.Result{In: n, Out: written, Metrics: agg.Metrics{}}, nil
}
