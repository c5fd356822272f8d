package pipeline

import (
	"cmp"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/bitutil"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/advantage"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/parallel"
)

// PipelineSide returns the stages of a pipeline-side advantage fn (or
// filter, or add strategy), as Trinity-RFT's experience pipeline runs it:
// the fn plans the store from the group pass (keep flag and score per row,
// duplicate blocks), then three steps carry the plan out on every batch —
// filter (drop the rows the plan drops), advantage (advantages = returns =
// score × action_mask) and duplicate (copy the rows of duplicated groups).
func PipelineSide(name string, fn advantage.PipelineFn) []Stage {
	p := &planStage{name: name, fn: fn}
	return []Stage{p, &filterStage{p}, &scoreStage{p}, &duplicateStage{p}}
}

// planStage runs the fn over the group pass's Input.
type planStage struct {
	name   string
	fn     advantage.PipelineFn
	g      *Grouping
	plan   *advantage.Plan
	dups   *dupIndex
	opTime time.Duration
}

func (p *planStage) Name() string { return p.name }

func (p *planStage) Needs() Needs {
	n := advantage.NeedsOf(p.fn)
	return Needs{
		Columns:    []string{schema.Batch, schema.Task, schema.Reward},
		Group:      &GroupNeeds{Needs: n},
		CrossBatch: advantage.CrossBatchOf(p.fn),
	}
}

func (p *planStage) Group(g *Grouping) error {
	start := time.Now()
	plan, err := p.fn.Plan(g.Input)
	if err != nil {
		return err
	}
	p.opTime = time.Since(start)
	p.g, p.plan, p.dups = g, plan, indexDups(plan)
	return nil
}

func (p *planStage) Finish(res *Result) error {
	res.Filtered += int64(p.plan.Filtered)
	res.Metrics.Merge("experience_pipeline", p.plan.Metrics)
	res.Weights.Merge("experience_pipeline", p.plan.Weights)
	res.Metrics["time/experience_pipeline/operator/"+p.name] = p.opTime.Seconds()
	return nil
}

// row returns the plan row of row i of b, -1 for a row the group pass dropped.
func (p *planStage) row(b *Batch, i int) int32 { return p.g.Row(b.Row + int64(i)) }

// filterStage drops the rows the plan does not keep.
type filterStage struct{ p *planStage }

func (f *filterStage) Name() string { return f.p.name + "/filter" }

func (f *filterStage) Needs() Needs {
	p := f.p
	return Needs{Drops: p.plan == nil || p.plan.Filtered > 0 || p.g.planRow != nil}
}

func (f *filterStage) Apply(b *Batch) error {
	for i := 0; i < b.Len(); i++ {
		switch r := f.p.row(b, i); {
		case r < 0:
			b.DropFor(i, "invalid_reward_filter", advantage.DropInvalid)
		case !f.p.plan.Keep[r]:
			b.DropFor(i, f.p.name, cmp.Or(f.p.plan.DropReason(int(r)), "filtered"))
		}
	}
	return nil
}

// scoreStage writes advantages = returns = score × action_mask (returns =
// Plan.Return × action_mask where the plan has returns of its own). A plan
// without scores (a filter) writes nothing: the input's advantages pass.
type scoreStage struct{ p *planStage }

func (s *scoreStage) Name() string { return s.p.name + "/advantage" }

func (s *scoreStage) Needs() Needs {
	if s.p.plan == nil || s.p.plan.Score == nil {
		return Needs{}
	}
	return Needs{Columns: []string{schema.ActionMask}, Writes: []string{schema.Advantages, schema.Returns}}
}

func (s *scoreStage) Apply(b *Batch) error {
	if s.p.plan.Score == nil {
		return nil
	}
	score := make([]float32, b.Len())
	for i := range score {
		if r := s.p.row(b, i); r >= 0 {
			score[i] = s.p.plan.Score[r]
		}
	}
	adv, err := broadcast(b.Mask(), score, true)
	if err != nil {
		return err
	}
	b.Set(schema.Advantages, adv)
	if s.p.plan.Return == nil {
		adv.Retain() // returns is a copy of advantages: the same values
		b.Set(schema.Returns, adv)
		return nil
	}
	for i := range score { // cod's iterative mode: returns of their own
		if r := s.p.row(b, i); r >= 0 {
			score[i] = s.p.plan.Return[r]
		}
	}
	ret, err := broadcast(b.Mask(), score, true)
	if err != nil {
		return err
	}
	b.Set(schema.Returns, ret)
	return nil
}

// duplicateStage copies the kept rows of the plan's duplicate blocks.
type duplicateStage struct{ p *planStage }

func (d *duplicateStage) Name() string { return d.p.name + "/duplicate" }

func (d *duplicateStage) Needs() Needs {
	return Needs{Duplicates: d.p.plan != nil && len(d.p.plan.Dups) > 0}
}

func (d *duplicateStage) Apply(b *Batch) error {
	for i := 0; i < b.Len(); i++ {
		r := d.p.row(b, i)
		if r < 0 || !d.p.plan.Keep[r] {
			continue
		}
		for _, k := range d.p.dups.of(r) {
			b.Copy(i, d.p.plan.Dups[k].TaskOffset)
		}
	}
	return nil
}

// broadcast returns list<float32> rows score[i] × mask row i (Broadcast of
// the advantage stage, built straight into Arrow buffers), or with masked
// false score[i] on every token of row i; a null mask row gives a null row.
func broadcast(maskCol arrow.Array, score []float32, masked bool) (arrow.Array, error) {
	mask, ok := maskCol.(array.ListLike)
	if !ok {
		return nil, schema.BadInputf("column %s: want a list, have %s", schema.ActionMask, maskCol.DataType())
	}
	bits, ok := mask.ListValues().(*array.Boolean)
	if !ok {
		return nil, schema.BadInputf("column %s: want list<bool>, have %s", schema.ActionMask, maskCol.DataType())
	}
	n := mask.Len()
	lens := make([]int, n)
	for i := range lens {
		if lo, hi := mask.ValueOffsets(i); mask.IsValid(i) {
			lens[i] = int(hi - lo)
		}
	}
	rows := agg.NewRows(lens)
	offBuf := tokenBuffer(arrow.Int32Traits.BytesRequired(n + 1))
	defer offBuf.Release()
	valBuf := tokenBuffer(arrow.Float32Traits.BytesRequired(rows.Tokens()))
	defer valBuf.Release()
	offsets, vals := arrow.Int32Traits.CastFromBytes(offBuf.Bytes()), arrow.Float32Traits.CastFromBytes(valBuf.Bytes())
	for i, o := range rows.Off {
		offsets[i] = int32(o)
	}
	bm, off := bitmap(bits)
	bounds := rows.Chunks(parallel.SpanSize) // chunks of rows spread over the cores
	parallel.For(len(bounds)-1, func(c int) {
		for i := bounds[c]; i < bounds[c+1]; i++ {
			lo, _ := mask.ValueOffsets(i)
			dst := vals[rows.Off[i]:rows.Off[i+1]]
			s := score[i]
			if !masked {
				for k := range dst {
					dst[k] = s
				}
				continue
			}
			// -0 for a negative score (upstream's score × mask) or the score
			pickBits(dst, bm, off+int(lo), [2]float32{s * 0, s})
		}
	})
	var valid *memory.Buffer
	nulls := mask.NullN()
	if nulls > 0 {
		bm := make([]byte, bitutil.BytesForBits(int64(n)))
		for i := 0; i < n; i++ {
			if mask.IsValid(i) {
				bitutil.SetBit(bm, i)
			}
		}
		valid = memory.NewBufferBytes(bm)
	}
	child := array.NewData(arrow.PrimitiveTypes.Float32, len(vals), []*memory.Buffer{nil, valBuf}, nil, 0, 0)
	defer child.Release()
	data := array.NewData(schema.Field(schema.Advantages).Type, n, []*memory.Buffer{valid, offBuf},
		[]arrow.ArrayData{child}, nulls, 0)
	defer data.Release()
	return array.MakeFromData(data), nil
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
