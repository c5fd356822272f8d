package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/stages/advantage"
	"github.com/rftpipe/rftpipe/stages/agg"
)

// Run runs job: see the package documentation for the steps. On any error
// nothing is left at job.Out (an existing file there is untouched) and the
// input is never modified.
func Run(ctx context.Context, job Job) (*Result, error) {
	start := time.Now()
	if err := job.check(); err != nil {
		return nil, err
	}
	fn, need, err := job.stage()
	if err != nil {
		return nil, err
	}

	// 1. Open the store; check the columns the fn and the writer need.
	r, err := store.Open(job.In, store.BatchRows(job.BatchRows))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if err := schema.Require(r.Files()[0], r.Schema(), need.columns()...); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "rftpipe-run-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)

	// 2. Group pass: DuckDB groups the rows, the stage plans them.
	g, err := groupPass(ctx, job.In, r.Files(), need, tmp)
	if err != nil {
		return nil, err
	}
	if g.invalid > 0 && job.OnInvalidReward == InvalidError {
		return nil, locateInvalidReward(job.In, g.firstInvalid)
	}
	g.in.Seed = job.Seed
	opStart := time.Now()
	plan, err := fn.Plan(g.in)
	if err != nil {
		return nil, err
	}
	opTime := time.Since(opStart)
	withAdv := plan.Score != nil // filters compute no advantage
	if withAdv {
		if err := schema.Require(r.Files()[0], r.Schema(), schema.ActionMask); err != nil {
			return nil, err
		}
	}

	// 3+4. One streaming pass into the output store; copies go to a spill
	// store and are appended at the end.
	withDup := len(plan.Dups) > 0 || len(r.Schema().FieldIndices(schema.DuplicateOf)) > 0
	sh := newShaper(r.Schema(), withAdv, withDup)
	w, err := store.Create(job.Out, sh.out, store.NotOver(job.In), store.WithParquet(job.Parquet))
	if err != nil {
		return nil, err
	}
	defer w.Abort()
	s := &streamer{job: &job, g: g, plan: plan, sh: sh, dups: indexDups(plan), rng: advantage.NewRNG(job.Seed ^ suffixSalt)}
	if len(plan.Dups) > 0 {
		if s.spill, err = store.Create(filepath.Join(tmp, "copies.arrows"), sh.out); err != nil {
			return nil, err
		}
		defer s.spill.Abort()
	}
	writeStart := time.Now()
	if err := s.run(ctx, r, w); err != nil {
		return nil, err
	}
	if err := s.appendCopies(ctx, w, filepath.Join(tmp, "copies.arrows")); err != nil {
		return nil, err
	}
	if err := w.Commit(); err != nil {
		return nil, err
	}

	// 5. Metrics.
	res := &Result{
		In: g.rows, Out: w.Rows(), Duplicated: s.copied, Filtered: int64(plan.Filtered),
		InvalidDropped: g.invalid, Groups: g.in.Tasks.Len(), Metrics: agg.Metrics{},
	}
	res.Metrics.Merge("experience_pipeline", plan.Metrics)
	// Upstream's invalid_reward_filter also reports filtered_count, which the
	// fn's own filtered_count then overwrites; its count is kept here
	// under its own name instead of being lost.
	if job.OnInvalidReward == InvalidDrop {
		res.Metrics["experience_pipeline/invalid_reward_filter/filtered_count"] = float64(g.invalid)
	}
	res.Metrics["experience_pipeline/experience_count"] = float64(res.Out)
	res.Metrics["time/experience_pipeline/operator/"+job.name()] = opTime.Seconds()
	res.Metrics["time/experience_pipeline/write"] = time.Since(writeStart).Seconds()
	res.Elapsed = time.Since(start)
	res.Metrics["time/experience_pipeline/total"] = res.Elapsed.Seconds()
	return res, nil
}

// suffixSalt separates the suffix generator's stream from the stage's.
const suffixSalt = 0x5eed5f1f

// streamer is the streaming pass: it reads batches on one goroutine, shapes
// them on the caller's and writes them on a third, so reading, computing and
// encoding overlap.
type streamer struct {
	job    *Job
	g      *grouping
	plan   *advantage.Plan
	sh     *shaper
	dups   *dupIndex
	rng    *advantage.RNG
	spill  *store.Writer
	copied int64
}

// batch is one input record batch and where it starts.
type batch struct {
	rec          arrow.Record
	file         string
	fileRow, row int64
	spill        bool // (output) rec holds copies, for the spill store
}

func (s *streamer) run(ctx context.Context, r *store.Reader, w *store.Writer) error {
	eg, ctx := errgroup.WithContext(ctx)
	in := make(chan batch, 1)
	out := make(chan batch, 1)
	eg.Go(func() error { // read
		defer close(in)
		for {
			rec, err := r.Next()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			if s.job.Progress != nil {
				s.job.Progress(rec.NumRows())
			}
			rec.Retain()
			file, fileRow, row := r.Pos()
			select {
			case in <- batch{rec: rec, file: file, fileRow: fileRow, row: row}:
			case <-ctx.Done():
				rec.Release()
				return ctx.Err()
			}
		}
	})
	eg.Go(func() error { // write
		for b := range out {
			err := error(nil)
			if b.spill {
				err = s.spill.Write(b.rec)
			} else {
				err = w.Write(b.rec)
			}
			b.rec.Release()
			if err != nil {
				drain(out)
				return err
			}
		}
		return nil
	})
	eg.Go(func() error { // shape
		defer close(out)
		for b := range in {
			outs, err := s.shapeBatch(b)
			b.rec.Release()
			for _, o := range outs {
				select {
				case out <- o:
				case <-ctx.Done():
					o.rec.Release()
					err = ctx.Err()
				}
			}
			if err != nil {
				drain(in)
				return err
			}
		}
		return nil
	})
	return eg.Wait()
}

func drain(ch chan batch) {
	for b := range ch {
		b.rec.Release()
	}
}

// shapeBatch validates one input batch and returns its output batches: the
// kept rows, then (for the spill) the copies of its duplicated rows.
func (s *streamer) shapeBatch(b batch) ([]batch, error) {
	if err := schema.Validate(b.file, b.fileRow, b.rec, schema.ValidateOptions{AllowInvalidReward: true}); err != nil {
		return nil, err
	}
	n := int(b.rec.NumRows())
	var keep []int64
	score := make([]float32, 0, n)
	var cp copies
	var take []int64
	var cpScore []float32
	for i := 0; i < n; i++ {
		row := b.row + int64(i)
		p := s.g.row(row)
		if p < 0 || !s.plan.Keep[p] {
			continue
		}
		sc := float32(0)
		if s.plan.Score != nil {
			sc = s.plan.Score[p]
		}
		keep = append(keep, int64(i))
		score = append(score, sc)
		for _, d := range s.dups.of(p) {
			take = append(take, int64(i))
			cpScore = append(cpScore, sc)
			cp.of = append(cp.of, row)
			cp.offset = append(cp.offset, s.plan.Dups[d].TaskOffset)
		}
	}
	var outs []batch
	if len(keep) > 0 {
		rec, err := s.shapeRows(b.rec, keep, score, nil)
		if err != nil {
			return nil, err
		}
		outs = append(outs, batch{rec: rec})
	}
	if len(take) > 0 {
		cp.suffix = s.freshSuffixes(b.rec, take, cp.of)
		rec, err := s.shapeRows(b.rec, take, cpScore, &cp)
		if err != nil {
			releaseAll(outs)
			return nil, err
		}
		s.copied += int64(len(take))
		outs = append(outs, batch{rec: rec, spill: true})
	}
	return outs, nil
}

// shapeRows shapes rows idx of rec (all of them, in order, when idx covers
// every row).
func (s *streamer) shapeRows(rec arrow.Record, idx []int64, score []float32, cp *copies) (arrow.Record, error) {
	if len(idx) == int(rec.NumRows()) && cp == nil {
		return s.sh.shape(rec, score, nil)
	}
	sel, err := takeRows(rec, idx)
	if err != nil {
		return nil, err
	}
	defer sel.Release()
	return s.sh.shape(sel, score, cp)
}

// takeRows returns the rows idx of rec, in that order: each run of
// consecutive rows is a zero-copy slice, and the slices of every column are
// concatenated (linear; arrow's compute.Take regrows its list buffers for
// every row it adds, quadratic in the batch's token count).
func takeRows(rec arrow.Record, idx []int64) (arrow.Record, error) {
	type run struct{ lo, hi int64 }
	var runs []run
	for _, i := range idx {
		if k := len(runs) - 1; k >= 0 && runs[k].hi == i {
			runs[k].hi++
		} else {
			runs = append(runs, run{i, i + 1})
		}
	}
	if len(runs) == 0 {
		runs = append(runs, run{0, 0})
	}
	cols := make([]arrow.Array, rec.NumCols())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	parts := make([]arrow.Array, len(runs))
	for i, c := range rec.Columns() {
		for k, r := range runs {
			parts[k] = array.NewSlice(c, r.lo, r.hi)
		}
		var err error
		if len(parts) == 1 {
			cols[i] = parts[0]
		} else {
			cols[i], err = array.Concatenate(parts, memory.DefaultAllocator)
			for _, p := range parts {
				p.Release()
			}
		}
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", rec.ColumnName(i), err)
		}
	}
	return array.NewRecord(rec.Schema(), cols, int64(len(idx))), nil
}

func releaseAll(bs []batch) {
	for _, b := range bs {
		b.rec.Release()
	}
}

// freshSuffixes draws a suffix for every copy: six hex digits, like
// upstream's, from the seeded generator, differing from the suffix of the row
// copied and of its other copies (so every uid stays unique).
func (s *streamer) freshSuffixes(rec arrow.Record, take, of []int64) []string {
	var orig arrow.Array
	if s.sh.suffix >= 0 {
		orig = rec.Column(s.sh.suffix)
	}
	out := make([]string, len(take))
	for i := range take {
		for {
			v := fmt.Sprintf("%06x", s.rng.Uint64()&0xffffff)
			if orig != nil && orig.IsValid(int(take[i])) && orig.ValueStr(int(take[i])) == v {
				continue
			}
			clash := false
			for k := i - 1; k >= 0 && of[k] == of[i]; k-- {
				clash = clash || out[k] == v
			}
			if !clash {
				out[i] = v
				break
			}
		}
	}
	return out
}

// appendCopies appends the spilled copies to w, in the order they were set
// aside (the order of the rows they copy).
func (s *streamer) appendCopies(ctx context.Context, w *store.Writer, path string) error {
	if s.spill == nil {
		return nil
	}
	if err := s.spill.Commit(); err != nil {
		return err
	}
	r, err := store.Open(path, store.BatchRows(s.job.BatchRows))
	if err != nil {
		return err
	}
	defer r.Close()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := w.Write(rec); err != nil {
			return err
		}
	}
}

// row returns the plan row of store row i, -1 if it was dropped for an
// invalid reward.
func (g *grouping) row(i int64) int32 {
	if g.planRow == nil {
		return int32(i)
	}
	return g.planRow[i]
}

// dupIndex lists, per plan row, the duplicate blocks that copy it (CSR).
type dupIndex struct {
	off []int32
	dup []int32
}

func indexDups(p *advantage.Plan) *dupIndex {
	if len(p.Dups) == 0 {
		return &dupIndex{}
	}
	n := len(p.Keep)
	ix := &dupIndex{off: make([]int32, n+1)}
	for _, d := range p.Dups {
		for _, r := range p.Groups.Group(int(d.Group)) {
			if p.Keep[r] {
				ix.off[r+1]++
			}
		}
	}
	for i := 0; i < n; i++ {
		ix.off[i+1] += ix.off[i]
	}
	ix.dup = make([]int32, ix.off[n])
	next := append([]int32(nil), ix.off[:n]...)
	for k, d := range p.Dups {
		for _, r := range p.Groups.Group(int(d.Group)) {
			if p.Keep[r] {
				ix.dup[next[r]] = int32(k)
				next[r]++
			}
		}
	}
	return ix
}

// of returns the duplicate blocks copying plan row r, in block order.
func (ix *dupIndex) of(r int32) []int32 {
	if ix.off == nil {
		return nil
	}
	return ix.dup[ix.off[r]:ix.off[r+1]]
}
