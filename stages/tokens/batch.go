// Package tokens holds the token batch every loss-side stage reads (ragged
// rows of per-token inputs under canonical names) and the one CPU driver that
// evaluates per-token kernels over it: deterministic, parallel over fixed
// chunks of rows, one pass over the inputs, no per-token allocation.
//
// A kernel (package loss, kl, entropy) is the per-token math of one aggregated
// term; the driver hands it one row at a time with the row's aggregation
// weight, and reduces its per-row sums in a fixed order, so results are
// bit-identical for any GOMAXPROCS.
package tokens

import (
	"slices"
	"strings"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/parallel"
)

// Input names, canonical (schema.Input's names, Trinity's naming).
const (
	LogProb        = string(schema.InLogprob)
	OldLogProb     = string(schema.InOldLogprob)
	RefLogProb     = string(schema.InRefLogprob)
	Advantages     = string(schema.InAdvantages)
	ActionMask     = string(schema.InActionMask)
	TeacherLogProb = string(schema.InTeacherLogprob)
	Entropy        = string(schema.InEntropy)
	Values         = string(schema.InValues)
	// RolloutISWeights multiply into the per-token loss of the losses that
	// take them.
	RolloutISWeights = string(schema.InRolloutISWeights)
	// Per-row inputs.
	ExpertMask = string(schema.InExpertMask)
	Step       = "step" // int per row: training step (mix_chord)
)

// tokenInputs are the per-token canonical inputs, in schema.Inputs' order.
var tokenInputs = func() []string {
	var out []string
	for _, in := range schema.Inputs() {
		if !in.PerRow() {
			out = append(out, string(in))
		}
	}
	return out
}()

// IsTokenInput reports whether a canonical name is a per-token input.
func IsTokenInput(name string) bool { return slices.Contains(tokenInputs, name) }

// Batch is a ragged batch of B rows: every per-token input is a flat slice
// of Rows.Tokens() values laid out by Rows; per-row inputs have B entries.
// Build it with New and the Set methods; a Batch is read-only during
// evaluation and may be evaluated concurrently.
type Batch struct {
	Rows   agg.Rows
	cols   map[string][]float64
	cols32 map[string][]float32 // inputs held as stored (Set32)
	expert []bool
	step   []int64
	counts []float64 // per-row mask counts, set with the mask
	total  float64   // Σ counts
	chunks []int     // row boundaries of the evaluation chunks
	first  int       // batch row index of row 0 (SetWindow)
	totals *Totals   // the whole batch's totals (SetWindow); nil: b is the batch
}

// chunkTokens is the evaluation chunk size: rows are grouped into chunks of
// at least this many tokens; chunk sums are reduced in chunk order.
const chunkTokens = 1 << 15

// New returns an empty batch with the given row layout.
func New(rows agg.Rows) *Batch {
	return &Batch{Rows: rows, cols: map[string][]float64{}, chunks: rows.Chunks(chunkTokens)}
}

// FromMatrix builds a batch from row-major ragged rows of one input (its
// length defines the layout) — a convenience for tests and golden files.
func FromMatrix(name string, rows [][]float64) (*Batch, error) {
	lens := make([]int, len(rows))
	flat := make([]float64, 0)
	for i, r := range rows {
		lens[i] = len(r)
		flat = append(flat, r...)
	}
	b := New(agg.NewRows(lens))
	return b, b.Set(name, flat)
}

// Set stores a per-token input under its canonical name (aliases accepted).
// Its length must be Rows.Tokens(). Setting action_mask computes the row mask
// counts the aggregation modes need.
func (b *Batch) Set(name string, v []float64) error {
	name = schema.InputName(name)
	if !IsTokenInput(name) {
		return schema.BadInputf("unknown token input %q (valid: %s)", name, strings.Join(tokenInputs, ", "))
	}
	if len(v) != b.Rows.Tokens() {
		return schema.BadInputf("input %s has %d tokens, the batch has %d", name, len(v), b.Rows.Tokens())
	}
	b.cols[name] = v
	if name == ActionMask {
		// Rows count over the cores; the total adds them in row order.
		b.counts = make([]float64, b.Rows.N())
		parallel.For(len(b.chunks)-1, func(k int) {
			for r := b.chunks[k]; r < b.chunks[k+1]; r++ {
				lo, hi := b.Rows.Span(r)
				b.counts[r] = agg.Count(v[lo:hi])
			}
		})
		b.total = 0
		for _, c := range b.counts {
			b.total += c
		}
	}
	return nil
}

// Set32 stores a per-token input as a store holds it, float32 values not
// converted, for a reader that takes them (Col32): Col does not return it.
// Its length must be Rows.Tokens(); action_mask is Set's alone.
func (b *Batch) Set32(name string, v []float32) error {
	name = schema.InputName(name)
	if !IsTokenInput(name) || name == ActionMask {
		return schema.BadInputf("unknown float32 token input %q (valid: %s; not %s)", name, strings.Join(tokenInputs, ", "), ActionMask)
	}
	if len(v) != b.Rows.Tokens() {
		return schema.BadInputf("input %s has %d tokens, the batch has %d", name, len(v), b.Rows.Tokens())
	}
	if b.cols32 == nil {
		b.cols32 = map[string][]float32{}
	}
	b.cols32[name] = v
	return nil
}

// SetMatrix stores a per-token input given as ragged rows (see Flatten).
func (b *Batch) SetMatrix(name string, rows [][]float64) error {
	flat, err := b.Flatten(schema.InputName(name), rows)
	if err != nil {
		return err
	}
	return b.Set(name, flat)
}

// Flatten lays ragged rows out as the batch's flat per-token slice; every
// row must have the batch's length for that row. name is for errors.
func (b *Batch) Flatten(name string, rows [][]float64) ([]float64, error) {
	if len(rows) != b.Rows.N() {
		return nil, schema.BadInputf("input %s has %d rows, the batch has %d", name, len(rows), b.Rows.N())
	}
	flat := make([]float64, 0, b.Rows.Tokens())
	for r, row := range rows {
		lo, hi := b.Rows.Span(r)
		if len(row) != hi-lo {
			return nil, schema.BadInputf("input %s row %d has %d tokens, want %d", name, r, len(row), hi-lo)
		}
		flat = append(flat, row...)
	}
	return flat, nil
}

// SetExpertMask stores the per-row expert flags (length B).
func (b *Batch) SetExpertMask(v []bool) error {
	if len(v) != b.Rows.N() {
		return schema.BadInputf("expert_mask has %d rows, the batch has %d", len(v), b.Rows.N())
	}
	b.expert = v
	return nil
}

// SetStep stores the per-row training step (length B).
func (b *Batch) SetStep(v []int64) error {
	if len(v) != b.Rows.N() {
		return schema.BadInputf("step has %d rows, the batch has %d", len(v), b.Rows.N())
	}
	b.step = v
	return nil
}

// Col returns a per-token input, or nil when absent (or set by Set32).
func (b *Batch) Col(name string) []float64 { return b.cols[schema.InputName(name)] }

// Col32 returns a per-token input set by Set32, or nil.
func (b *Batch) Col32(name string) []float32 { return b.cols32[schema.InputName(name)] }

// ExpertMask returns the per-row expert flags, or nil when absent.
func (b *Batch) ExpertMask() []bool { return b.expert }

// Step returns the per-row steps, or nil when absent.
func (b *Batch) Step() []int64 { return b.step }

// Has reports whether an input (per-token or per-row) is present, set by
// Set or Set32.
func (b *Batch) Has(name string) bool {
	switch name = schema.InputName(name); name {
	case ExpertMask:
		return b.expert != nil
	case Step:
		return b.step != nil
	}
	return b.cols[name] != nil || b.cols32[name] != nil
}

// Require checks that every named input is present; the error names what is
// missing and what the batch has.
func (b *Batch) Require(names ...string) error {
	var missing []string
	for _, n := range names {
		if !b.Has(n) {
			missing = append(missing, schema.InputName(n))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	have := []string{}
	for _, n := range append(tokenInputs, ExpertMask, Step) {
		if b.Has(n) {
			have = append(have, n)
		}
	}
	return &schema.MissingInputError{Column: missing[0], More: missing[1:], Has: have}
}

// RowCount returns row r's mask count Σ_t m (0 without a mask).
func (b *Batch) RowCount(r int) float64 {
	if b.counts == nil {
		return 0
	}
	return b.counts[r]
}

// MaskTotal returns Σ m over the whole batch.
func (b *Batch) MaskTotal() float64 { return b.total }

// Split returns a flat per-token slice as one sub-slice per row (sharing v).
func (b *Batch) Split(v []float64) [][]float64 {
	out := make([][]float64, b.Rows.N())
	for r := range out {
		lo, hi := b.Rows.Span(r)
		out[r] = v[lo:hi:hi]
	}
	return out
}
