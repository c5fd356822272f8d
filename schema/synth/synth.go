// Package synth generates seeded synthetic experience stores for tests, the
// demo and benchmarks. The same Config gives the same record batches, byte for
// byte, whatever the number of CPUs: rows are generated in fixed-size chunks,
// each from its own seeded generator, and emitted in order.
package synth

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/rftpipe/rftpipe/schema"
)

// Kind is the experience type generated.
type Kind string

// Kinds of store.
const (
	Single Kind = "single" // one generated answer per row, action_mask all ones
	Multi  Kind = "multi"  // multi-turn: tool/environment tokens masked out
	DPO    Kind = "dpo"    // tokens = prompt; chosen/rejected answers
	// Pairs is DPO as the trainer sees it: each task one preference pair
	// of two adjacent rows, run 0 the chosen and run 1 the rejected answer,
	// tokens = prompt ++ answer (Runs must be 2).
	Pairs Kind = "pairs"
)

// Config describes a store. Tasks are spread over batches of TasksPerBatch
// tasks (eid.task = index inside its batch, so distinct tasks = distinct
// batch/task pairs); each task has Runs runs of Steps steps.
type Config struct {
	Tasks, Runs, Steps, TasksPerBatch int
	PromptLen                         int
	RespMin, RespMax                  int
	Reward                            string // "bernoulli:P", "uniform" or "normal"
	Kind                              Kind
	Seed                              uint64
	// With are TrainerColumns added to each row (canonical order; see
	// ParseWith).
	With []string
	// Info adds the info column of a multi-step agent (env_state_hash,
	// step_reward); RewardComponents a reward_<name> column per name, the
	// reward their sum (agent.go).
	Info             bool
	RewardComponents []string
	ChunkRows        int // rows per record batch (default 8192)
}

// Bounds of a configuration, checked before anything is generated:
// MaxCount for tasks, runs, steps and tasks per batch, MaxRows for their
// product, MaxLen for the prompt and response lengths in tokens.
const (
	MaxCount = 1 << 30
	MaxRows  = 1 << 40
	MaxLen   = 1 << 17
)

// chunkTokens bounds the tokens of one record batch, so that long rows come
// in fewer rows per batch and memory stays bounded.
const chunkTokens = 1 << 24

// Default returns the default configuration.
func Default() Config {
	return Config{Tasks: 64, Runs: 8, Steps: 1, TasksPerBatch: 32, PromptLen: 64, RespMin: 256, RespMax: 256,
		Reward: "bernoulli:0.5", Kind: Single, Seed: 1, ChunkRows: 8192}
}

// ParseRange parses "N" or "MIN:MAX".
func ParseRange(s string) (lo, hi int, err error) {
	a, b, ok := strings.Cut(s, ":")
	if lo, err = strconv.Atoi(a); err != nil {
		return 0, 0, schema.BadInputf("bad length %q: want N or MIN:MAX", s)
	}
	hi = lo
	if ok {
		if hi, err = strconv.Atoi(b); err != nil {
			return 0, 0, schema.BadInputf("bad length %q: want N or MIN:MAX", s)
		}
	}
	if lo < 1 || hi < lo || hi > MaxLen {
		return 0, 0, schema.BadInputf("bad length %q: want 1 <= MIN <= MAX <= %d", s, MaxLen)
	}
	return lo, hi, nil
}

type rewardFn func(taskRNG, rowRNG *rand.Rand) float64

func (c Config) rewardFn() (rewardFn, error) {
	switch {
	case strings.HasPrefix(c.Reward, "bernoulli:"):
		p, err := strconv.ParseFloat(strings.TrimPrefix(c.Reward, "bernoulli:"), 64)
		if err != nil || !(p > 0 && p < 1) {
			return nil, schema.BadInputf("bad reward %q: want bernoulli:P with 0 < P < 1", c.Reward)
		}
		// Each task has its own success rate u^(1/P-1), whose mean over tasks
		// is P; easy and hard tasks give the zero-variance groups real data has.
		a := 1/p - 1
		return func(task, row *rand.Rand) float64 {
			if row.Float64() < math.Pow(task.Float64(), a) {
				return 1
			}
			return 0
		}, nil
	case c.Reward == "uniform":
		return func(_, row *rand.Rand) float64 { return row.Float64() }, nil
	case c.Reward == "normal":
		return func(task, row *rand.Rand) float64 { return task.NormFloat64() + row.NormFloat64() }, nil
	}
	return nil, schema.BadInputf("bad reward %q: want bernoulli:P, uniform or normal", c.Reward)
}

func (c Config) check() error {
	switch {
	case !inCount(c.Tasks) || !inCount(c.Runs) || !inCount(c.Steps) || !inCount(c.TasksPerBatch):
		return schema.BadInputf("tasks, runs, steps and tasks per batch must be in [1,%d]", MaxCount)
	case c.Rows() > MaxRows || c.Rows() <= 0 || c.Rows()/int64(c.Tasks)/int64(c.Runs) != int64(c.Steps):
		return schema.BadInputf("tasks × runs × steps must be at most %d", int64(MaxRows))
	case c.PromptLen < 1 || c.PromptLen > MaxLen:
		return schema.BadInputf("prompt length must be in [1,%d]", MaxLen)
	case c.RespMin < 1 || c.RespMax < c.RespMin || c.RespMax > MaxLen:
		return schema.BadInputf("response length must be 1 <= MIN <= MAX <= %d", MaxLen)
	case c.Kind != Single && c.Kind != Multi && c.Kind != DPO && c.Kind != Pairs:
		return schema.BadInputf("unknown kind %q (valid: single, multi, dpo, pairs)", c.Kind)
	case c.Kind == Pairs && (c.Runs != 2 || c.Steps != 1):
		return schema.BadInputf("kind pairs: a pair is 2 runs of 1 step (chosen, rejected), got %d runs of %d steps", c.Runs, c.Steps)
	case c.Kind == DPO && len(c.With) > 0:
		return schema.BadInputf("kind dpo has no response tokens to add %s to: use kind pairs (the trainer's rows of each pair)", strings.Join(c.With, ", "))
	}
	for _, name := range c.With {
		if !slices.Contains(TrainerColumns, name) {
			return schema.BadInputf("unknown trainer column %q (valid: %s)", name, strings.Join(TrainerColumns, ", "))
		}
	}
	if err := c.checkAgent(); err != nil {
		return err
	}
	_, err := c.rewardFn()
	return err
}

func inCount(n int) bool { return n >= 1 && n <= MaxCount }

// Rows returns the number of experiences the config generates.
func (c Config) Rows() int64 { return int64(c.Tasks) * int64(c.Runs) * int64(c.Steps) }

// Schema returns the store's schema for the config's kind: its base
// columns, then the With columns.
func (c Config) Schema() *arrow.Schema {
	s := schema.New(append(c.baseColumns(), c.With...)...)
	return arrow.NewSchema(append(s.Fields(), c.agentFields()...), nil)
}

// baseColumns are the columns of the config's kind.
func (c Config) baseColumns() []string {
	switch c.Kind {
	case DPO:
		return []string{schema.Batch, schema.Task, schema.Run, schema.Step, schema.Suffix,
			schema.PromptLength, schema.Tokens, schema.Chosen, schema.Rejected, schema.ModelVersion}
	case Pairs:
		return []string{schema.Batch, schema.Task, schema.Run, schema.Step, schema.Suffix,
			schema.PromptLength, schema.Tokens, schema.ActionMask, schema.ModelVersion}
	}
	return []string{schema.Batch, schema.Task, schema.Run, schema.Step, schema.Suffix, schema.Reward,
		schema.PromptLength, schema.Tokens, schema.Logprobs, schema.ActionMask,
		schema.TruncateStatus, schema.ModelVersion}
}

// Generate streams the store's record batches, in order, to emit. Chunks are
// built on all CPUs; emit runs on the caller's goroutine. A record is valid
// only during its emit call.
func Generate(ctx context.Context, c Config, emit func(arrow.Record) error) error {
	if c.ChunkRows <= 0 {
		c.ChunkRows = 8192
	}
	if err := c.check(); err != nil {
		return err
	}
	c.ChunkRows = max(1, min(c.ChunkRows, chunkTokens/(c.PromptLen+c.RespMax)))
	total := c.Rows()
	nchunks := int((total + int64(c.ChunkRows) - 1) / int64(c.ChunkRows))
	workers := runtime.GOMAXPROCS(0)
	type result struct {
		rec arrow.Record
		err error
	}
	// One channel per chunk keeps the output order fixed; at most `workers`
	// chunks are in flight, so memory stays bounded.
	slots := make(chan chan result, workers)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		defer close(slots)
		for i := 0; i < nchunks; i++ {
			ch := make(chan result, 1)
			select {
			case slots <- ch:
			case <-ctx.Done():
				return
			}
			go func(i int) {
				lo := int64(i) * int64(c.ChunkRows)
				hi := min(lo+int64(c.ChunkRows), total)
				rec, err := c.chunk(lo, hi)
				ch <- result{rec, err}
			}(i)
		}
	}()
	perBatch := int64(c.TasksPerBatch) * int64(c.Runs) * int64(c.Steps)
	for i := 0; i < nchunks; i++ {
		ch, ok := <-slots
		if !ok {
			break
		}
		r := <-ch
		if r.err != nil {
			return r.err
		}
		// A record (and so a row group of the store written from it) never
		// holds rows of two explore batches: a shard of a sharded job then
		// reads only the row groups of its own batches.
		lo := int64(i) * int64(c.ChunkRows)
		var err error
		for off := int64(0); off < r.rec.NumRows() && err == nil; {
			end := min(r.rec.NumRows(), ((lo+off)/perBatch+1)*perBatch-lo)
			part := r.rec.NewSlice(off, end)
			err = emit(part)
			part.Release()
			off = end
		}
		r.rec.Release()
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// rowIDs maps a row index to its ids: batches of TasksPerBatch tasks; inside a
// batch, run-major then task then step (the order an explorer emits them);
// a pairs store is task-major, each pair's two rows adjacent.
func (c Config) rowIDs(i int64) (batch, task, run, step int64) {
	perBatch := int64(c.TasksPerBatch) * int64(c.Runs) * int64(c.Steps)
	batch = i / perBatch
	off := i % perBatch
	if c.Kind == Pairs {
		return batch, off / 2, off % 2, 0
	}
	tasksHere := min(int64(c.TasksPerBatch), int64(c.Tasks)-batch*int64(c.TasksPerBatch))
	per := tasksHere * int64(c.Steps)
	run = off / per
	off %= per
	task = off / int64(c.Steps)
	step = off % int64(c.Steps)
	return
}

const vocab = 32000

func (c Config) chunk(lo, hi int64) (arrow.Record, error) {
	mem := memory.DefaultAllocator
	b := array.NewRecordBuilder(mem, c.Schema())
	defer b.Release()
	reward, _ := c.rewardFn()
	rng := rand.New(rand.NewPCG(c.Seed, uint64(lo)))
	extraRNG := rand.New(rand.NewPCG(c.Seed^0x5851f42d4c957f2d, uint64(lo)))
	agentRNG := rand.New(rand.NewPCG(c.Seed^0x2545f4914f6cdd1d, uint64(lo)))
	nbase := len(c.baseColumns())
	nextra := nbase + len(c.With)
	var comps []float64
	var toks []int32
	var lps []float32
	var mask []bool
	fs := b.Fields()
	for i := lo; i < hi; i++ {
		batch, task, run, step := c.rowIDs(i)
		taskRNG := rand.New(rand.NewPCG(c.Seed^0x9e3779b97f4a7c15, uint64(batch)<<32|uint64(task)))
		fs[0].(*array.Int64Builder).Append(batch)
		fs[1].(*array.Int64Builder).Append(task)
		fs[2].(*array.Int32Builder).Append(int32(run))
		fs[3].(*array.Int32Builder).Append(int32(step))
		fs[4].(*array.StringBuilder).Append(fmt.Sprintf("%06x", rng.Uint32()&0xffffff))
		R := c.RespMin + rng.IntN(c.RespMax-c.RespMin+1)
		toks = appendTokens(toks[:0], rng, c.PromptLen)
		if c.Kind == DPO {
			fs[5].(*array.Int32Builder).Append(int32(c.PromptLen))
			appendList(fs[6], toks)
			appendList(fs[7], appendTokens(toks[:0], rng, R))
			appendList(fs[8], appendTokens(toks[:0], rng, c.RespMin+rng.IntN(c.RespMax-c.RespMin+1)))
			fs[9].(*array.Int64Builder).Append(batch)
			continue
		}
		if c.Kind == Pairs {
			// Both rows of a pair share the task's prompt.
			toks = appendTokens(toks[:0], taskRNG, c.PromptLen)
			fs[5].(*array.Int32Builder).Append(int32(c.PromptLen))
			toks = appendTokens(toks, rng, R)
			appendList(fs[6], toks)
			lps, mask = lps[:0], mask[:0]
			for t := 0; t < R; t++ {
				mask = append(mask, true)
				lps = append(lps, float32(-rng.ExpFloat64()*0.35))
			}
			appendList(fs[7], mask)
			fs[8].(*array.Int64Builder).Append(batch)
			c.extraRow(fs[nbase:], extraRNG, lps, mask, 1-2*float64(run), 0)
			continue
		}
		r := reward(taskRNG, rng)
		info := ""
		if c.Info {
			info = c.infoJSON(agentRNG, batch, task, step)
		}
		if len(c.RewardComponents) > 0 {
			comps, r = c.components(agentRNG, comps)
		}
		fs[5].(*array.Float64Builder).Append(r)
		fs[6].(*array.Int32Builder).Append(int32(c.PromptLen))
		toks = appendTokens(toks, rng, R)
		appendList(fs[7], toks)
		lps, mask = lps[:0], mask[:0]
		tool := false
		seg := 0
		for t := 0; t < R; t++ {
			if c.Kind == Multi {
				if seg == 0 { // alternate assistant and tool segments
					if t > 0 {
						tool = !tool
					}
					seg = 8 + rng.IntN(57)
				}
				seg--
			}
			mask = append(mask, !tool)
			if tool {
				lps = append(lps, 0) // workflows zero the logprobs of tool tokens
			} else {
				// Mostly confident tokens, with a tail of unlikely ones.
				lps = append(lps, float32(-rng.ExpFloat64()*0.35))
			}
		}
		appendList(fs[8], lps)
		appendList(fs[9], mask)
		if c.RespMin < c.RespMax && R == c.RespMax {
			fs[10].(*array.StringBuilder).Append("response_truncated")
		} else {
			fs[10].AppendNull()
		}
		fs[11].(*array.Int64Builder).Append(batch)
		c.extraRow(fs[nbase:nextra], extraRNG, lps, mask, 0, r)
		c.appendAgent(fs[nextra:], info, comps)
	}
	return b.NewRecord(), nil
}

// appendTokens appends n token ids with a skewed (Zipf-like) distribution.
func appendTokens(dst []int32, rng *rand.Rand, n int) []int32 {
	for k := 0; k < n; k++ {
		dst = append(dst, int32(rng.ExpFloat64()*1500)%vocab)
	}
	return dst
}

func appendList[T int32 | float32 | bool](b array.Builder, vals []T) {
	lb := b.(*array.ListBuilder)
	lb.Append(true)
	switch vb := lb.ValueBuilder().(type) {
	case *array.Int32Builder:
		vb.AppendValues(any(vals).([]int32), nil)
	case *array.Float32Builder:
		vb.AppendValues(any(vals).([]float32), nil)
	case *array.BooleanBuilder:
		vb.AppendValues(any(vals).([]bool), nil)
	}
}
