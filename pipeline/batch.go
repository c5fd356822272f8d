package pipeline

import (
	"slices"
	"sort"
	"strings"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/bitutil"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/sql/duckdb"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/parallel"
)

// columns resolves names of rftpipe's vocabulary to the store's columns:
// the job's Columns mapping, then the name itself, then Trinity's and verl's
// names for it (schema.Aliases).
type columns struct {
	file  string
	sch   *arrow.Schema
	index map[string]int // vocabulary name → column index
}

func newColumns(file string, s *arrow.Schema, mapping map[string]string) *columns {
	c := &columns{file: file, sch: s, index: map[string]int{}}
	for i, f := range s.Fields() {
		if _, taken := c.index[f.Name]; !taken {
			c.index[f.Name] = i
		}
	}
	for alias, name := range schema.Aliases {
		if _, has := c.index[name]; !has {
			if i, ok := c.index[alias]; ok {
				c.index[name] = i
			}
		}
	}
	for name, col := range mapping {
		if i := fieldIndex(s, col); i >= 0 {
			c.index[name] = i
		}
	}
	return c
}

// lookup returns the column index of name, -1 when the store lacks it.
func (c *columns) lookup(name string) int {
	if i, ok := c.index[name]; ok {
		return i
	}
	return -1
}

// has reports whether the store has the column of name.
func (c *columns) has(name string) bool { return c.lookup(name) >= 0 }

// name returns the store's name of the column of name (name itself when
// the store lacks it).
func (c *columns) name(name string) string {
	if i := c.lookup(name); i >= 0 {
		return c.sch.Field(i).Name
	}
	return name
}

// selectAs returns the store's columns of names (those it has, once each)
// and the SQL select list that reads each under its name in names, e.g.
// "score" AS "reward".
func (c *columns) selectAs(names []string) (stored []string, sel string) {
	var list []string
	for _, n := range names {
		col := c.name(n)
		if c.lookup(n) < 0 || slices.Contains(stored, col) {
			continue
		}
		stored = append(stored, col)
		list = append(list, duckdb.QuoteIdent(col)+" AS "+duckdb.QuoteIdent(n))
	}
	return stored, strings.Join(list, ", ")
}

// require checks that the store has every named column.
func (c *columns) require(names ...string) error {
	for _, n := range names {
		if c.lookup(n) < 0 {
			have := make([]string, 0, c.sch.NumFields())
			for _, f := range c.sch.Fields() {
				have = append(have, f.Name)
			}
			sort.Strings(have)
			return schema.Errorf(c.file, -1, n, "missing required column (store has: %s)", strings.Join(have, ", "))
		}
		if err := schema.Require(c.file, c.sch, c.sch.Field(c.lookup(n)).Name); err != nil {
			return err
		}
	}
	return nil
}

// Batch is one record batch of the store on its way through the stages:
// the input columns, and what the stages decided about it so far.
type Batch struct {
	rec  arrow.Record
	cols *columns
	// File and FileRow locate the batch's first row in its file; Row is its
	// index in the whole store.
	File         string
	FileRow, Row int64
	// fileRows, when set, is each row's row in File (the rows of a shard,
	// taken out of a record); they were validated as read.
	fileRows []int64
	rows     *agg.Rows
	tokens   map[string][]float64
	set      map[string]arrow.Array
	// ofSet names the columns whose Tokens the stages after read from
	// their set array (SetWithTokens), not the input's.
	ofSet   map[string]bool
	drop    []bool
	why     []dropWhy
	dropped int
	copies  []copyOf
	mem     memory.Allocator
	rest    *store.Rest // the columns a deferred read did not decode
}

// copyOf is a copy of row Row of the batch, its task id moved by Offset.
type copyOf struct {
	Row    int
	Offset int64
}

// Len returns the number of rows.
func (b *Batch) Len() int { return int(b.rec.NumRows()) }

// Column returns the input column holding name, nil when the store lacks it.
func (b *Batch) Column(name string) arrow.Array {
	if i := b.cols.lookup(name); i >= 0 {
		return b.rec.Column(i)
	}
	return nil
}

// Mask returns the action_mask the stages before left: the one a stage set
// (an operator's or a correction's masked tokens), else the input's; nil
// when the store has none. Advantages spread over the tokens use it, as
// upstream's score × action_mask reads the mask its operators rewrote.
func (b *Batch) Mask() arrow.Array {
	if a := b.set[schema.ActionMask]; a != nil {
		return a
	}
	return b.Column(schema.ActionMask)
}

// Has reports whether the store has the column name.
func (b *Batch) Has(name string) bool { return b.cols.lookup(name) >= 0 }

// Errorf returns an error located at row i of the batch and column.
func (b *Batch) Errorf(i int, column, format string, args ...any) error {
	if b.fileRows != nil {
		return schema.Errorf(b.File, b.fileRows[i], column, format, args...)
	}
	return schema.Errorf(b.File, b.FileRow+int64(i), column, format, args...)
}

// Rows returns the layout of the batch's responses: each row's response
// length R, from action_mask (else logprobs): the layout of every per-token
// column.
func (b *Batch) Rows() (agg.Rows, error) {
	if b.rows != nil {
		return *b.rows, nil
	}
	name := schema.ActionMask
	if !b.Has(name) {
		name = schema.Logprobs
	}
	l, ok := b.Column(name).(array.ListLike)
	if !ok {
		return agg.Rows{}, schema.Errorf(b.File, -1, name, "missing: the response layout needs %s or %s", schema.ActionMask, schema.Logprobs)
	}
	lens := make([]int, b.Len())
	for i := range lens {
		if l.IsNull(i) {
			return agg.Rows{}, b.Errorf(i, name, "null list")
		}
		lo, hi := l.ValueOffsets(i)
		lens[i] = int(hi - lo)
	}
	r := agg.NewRows(lens)
	b.rows = &r
	return r, nil
}

// Tokens returns a per-token column as float64 values laid out by Rows
// (bools as 0/1), or nil when the store lacks it; a stage's SetTokens
// replaces it for the stages after. A null row or a row of another length
// is an error naming the row.
func (b *Batch) Tokens(name string) ([]float64, error) {
	v, err := b.TokensOf(name)
	if err != nil {
		return nil, err
	}
	return v[0], nil
}

// TokensOf is Tokens of several columns, in the names' order: those not
// yet converted are converted in one pass over the cores, so that their
// allocation (the runtime zeroes each fresh slice) and conversion run in
// parallel rather than one column after another on the stages' goroutine.
// The error is the first in the names' order, then row order.
func (b *Batch) TokensOf(names ...string) ([][]float64, error) {
	if err := b.loadTokens(names); err != nil {
		return nil, err
	}
	out := make([][]float64, len(names))
	for i, name := range names {
		out[i] = b.tokens[name]
	}
	return out, nil
}

// loadTokens converts the named columns not yet converted (a column the
// store lacks is skipped) and keeps them for Tokens.
func (b *Batch) loadTokens(names []string) error {
	cols := b.tokenColumns(names)
	if len(cols) == 0 {
		return nil
	}
	rows, err := b.Rows()
	if err != nil {
		return err
	}
	if err := b.convertTokens(cols, rows); err != nil {
		return err
	}
	if b.tokens == nil {
		b.tokens = map[string][]float64{}
	}
	for _, c := range cols {
		b.tokens[c.name] = c.out
	}
	return nil
}

// tokenColumn is a token-level column being converted.
type tokenColumn struct {
	name string
	l    array.ListLike
	vals arrow.Array
	err  error // the column's type error: its rows are not converted
	out  []float64
}

// tokenColumns returns the named columns the store has and Tokens has not
// converted yet, once each, with their type errors.
func (b *Batch) tokenColumns(names []string) []tokenColumn {
	var cols []tokenColumn
	for _, name := range names {
		if _, ok := b.tokens[name]; ok || slices.ContainsFunc(cols, func(c tokenColumn) bool { return c.name == name }) {
			continue
		}
		a := b.Column(name)
		if b.ofSet[name] {
			a = b.set[name]
		}
		if a == nil {
			continue
		}
		c := tokenColumn{name: name}
		var ok bool
		if c.l, ok = a.(array.ListLike); !ok {
			c.err = schema.Errorf(b.File, -1, name, "has type %s, want a list", a.DataType())
		} else {
			c.vals = c.l.ListValues()
			switch c.vals.(type) {
			case *array.Float32, *array.Float64, *array.Boolean:
			default:
				c.err = schema.Errorf(b.File, -1, name, "has type %s, want a list of float32, float64 or bool", a.DataType())
			}
		}
		cols = append(cols, c)
	}
	return cols
}

// convertTokens converts each column's rows into its flat output (out),
// in chunks of about parallel.SpanSize tokens over the cores (on the
// stages' goroutine this pass would be the job's serial part). It returns
// the first column's type error or, column by column, the first row's
// error.
func (b *Batch) convertTokens(cols []tokenColumn, rows agg.Rows) error {
	parallel.For(len(cols), func(c int) {
		if cols[c].err == nil {
			cols[c].out = make([]float64, rows.Tokens())
		}
	})
	bounds := rows.Chunks(parallel.SpanSize)
	chunks := len(bounds) - 1
	errs := make([]error, len(cols)*chunks)
	parallel.For(len(errs), func(k int) {
		c := &cols[k/chunks]
		if c.err != nil {
			return
		}
		for i := bounds[k%chunks]; i < bounds[k%chunks+1]; i++ {
			if errs[k] = b.tokenRow(c.name, c.l, c.vals, i, c.out[rows.Off[i]:rows.Off[i+1]]); errs[k] != nil {
				return
			}
		}
	})
	for c := range cols {
		if cols[c].err != nil {
			return cols[c].err
		}
		for _, err := range errs[c*chunks : (c+1)*chunks] {
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// tokenRow writes row i's values of list column name (l, with the values
// vals) into dst, the row's span of the flat output.
func (b *Batch) tokenRow(name string, l array.ListLike, vals arrow.Array, i int, dst []float64) error {
	lo, err := b.checkRow(name, l, vals, i, len(dst))
	if err != nil {
		return err
	}
	hi := lo + int64(len(dst))
	// One loop per value type: this runs for every token of the store.
	switch v := vals.(type) {
	case *array.Float32:
		src := v.Float32Values()[lo:hi]
		dst := dst[:len(src)] // one bounds check, not one per token
		for k, x := range src {
			dst[k] = float64(x)
		}
	case *array.Float64:
		copy(dst, v.Float64Values()[lo:hi])
	case *array.Boolean:
		bits, off := bitmap(v)
		pickBits(dst, bits, off+int(lo), [2]float64{0, 1})
	}
	return nil
}

// checkRow checks row i of list column name (l, with the values vals): not
// null, n values, none null. It returns the offset of the row's first value.
func (b *Batch) checkRow(name string, l array.ListLike, vals arrow.Array, i, n int) (int64, error) {
	if l.IsNull(i) {
		return 0, b.Errorf(i, name, "null list")
	}
	lo, hi := l.ValueOffsets(i)
	if int(hi-lo) != n {
		return 0, b.Errorf(i, name, "%d values, the row has %d response tokens", hi-lo, n)
	}
	if vals.NullN() > 0 {
		for k := range n {
			if vals.IsNull(int(lo) + k) {
				return 0, b.Errorf(i, name, "null value at token %d", k)
			}
		}
	}
	return lo, nil
}

// Float32Tokens returns the values of list<float32> column name laid out by
// Rows as the store holds them, not converted (a view of the column), and
// false when the column is not a list<float32> whose rows lie end to end
// (Tokens converts it). A null row, a row of another length or a null
// value is Tokens' error.
func (b *Batch) Float32Tokens(name string) ([]float32, bool, error) {
	l, ok := b.Column(name).(array.ListLike)
	if !ok {
		return nil, false, nil
	}
	vals, ok := l.ListValues().(*array.Float32)
	if !ok {
		return nil, false, nil
	}
	rows, err := b.Rows()
	if err != nil {
		return nil, false, err
	}
	var first int64
	for i := range b.Len() {
		lo, err := b.checkRow(name, l, vals, i, rows.Off[i+1]-rows.Off[i])
		if err != nil {
			return nil, true, err
		}
		if i == 0 {
			first = lo
		}
		if lo != first+int64(rows.Off[i]) {
			return nil, false, nil
		}
	}
	return vals.Float32Values()[first : first+int64(rows.Tokens())], true, nil
}

// SetTokens replaces the per-token values of name (laid out by Rows) for
// the stages after this one; it writes no column (Set does).
func (b *Batch) SetTokens(name string, v []float64) {
	if b.tokens == nil {
		b.tokens = map[string][]float64{}
	}
	b.tokens[name] = v
}

// Set sets the output column name (declared in the stage's Needs.Writes)
// to a, which the batch takes over.
func (b *Batch) Set(name string, a arrow.Array) {
	if b.set == nil {
		b.set = map[string]arrow.Array{}
	}
	if old := b.set[name]; old != nil {
		old.Release()
	}
	b.set[name] = a
}

// SetWithTokens sets the output column name to a (Set), laid out by Rows,
// and makes it the column the stages after read through Tokens, converted
// when one asks.
func (b *Batch) SetWithTokens(name string, a arrow.Array) {
	b.Set(name, a)
	delete(b.tokens, name)
	if b.ofSet == nil {
		b.ofSet = map[string]bool{}
	}
	b.ofSet[name] = true
}

// SetList sets the output column name from per-token values laid out by
// Rows: list<bool> for action_mask, list<float32> otherwise.
func (b *Batch) SetList(name string, v []float64) error {
	rows, err := b.Rows()
	if err != nil {
		return err
	}
	b.Set(name, listArray(v, rows, name == schema.ActionMask))
	return nil
}

// DropFor drops row i from the output: by (an operator or fn) dropped it
// for reason, which a rejected-rows store records. The first drop of a row
// is the one recorded.
func (b *Batch) DropFor(i int, by, reason string) {
	if b.drop == nil {
		b.drop = make([]bool, b.Len())
		b.why = make([]dropWhy, b.Len())
	}
	if !b.drop[i] {
		b.drop[i] = true
		b.why[i] = dropWhy{by: by, reason: reason}
		b.dropped++
	}
}

// dropWhy is who dropped a row and why.
type dropWhy struct{ by, reason string }

// Copy appends a copy of row i to the output (after every original row),
// with a fresh suffix and its task id moved by taskOffset.
func (b *Batch) Copy(i int, taskOffset int64) {
	b.copies = append(b.copies, copyOf{Row: i, Offset: taskOffset})
}

// release releases what the batch holds.
func (b *Batch) release() {
	for _, a := range b.set {
		a.Release()
	}
	b.set = nil
}

// pickBits sets dst[k] to pick[b], b bit j+k of the bitmap bm: without a
// branch, a byte of bits at a time where they are byte-aligned.
func pickBits[T float32 | float64](dst []T, bm []byte, j int, pick [2]T) {
	k := 0
	for ; k < len(dst) && (j+k)&7 != 0; k++ {
		dst[k] = pick[bm[(j+k)>>3]>>((j+k)&7)&1]
	}
	for ; k+8 <= len(dst); k += 8 {
		b, d := bm[(j+k)>>3], dst[k:k+8:k+8]
		d[0], d[1], d[2], d[3] = pick[b&1], pick[b>>1&1], pick[b>>2&1], pick[b>>3&1]
		d[4], d[5], d[6], d[7] = pick[b>>4&1], pick[b>>5&1], pick[b>>6&1], pick[b>>7]
	}
	for ; k < len(dst); k++ {
		dst[k] = pick[bm[(j+k)>>3]>>((j+k)&7)&1]
	}
}

// bitmap returns the values bitmap of a and the bit offset of its first
// value (value i is bit off+i).
func bitmap(a *array.Boolean) (bits []byte, off int) {
	if buf := a.Data().Buffers()[1]; buf != nil {
		bits = buf.Bytes()
	}
	return bits, a.Data().Offset()
}

// listArray builds the list column of flat values laid out by rows:
// list<bool> (v != 0) when isMask, list<float32> otherwise.
func listArray(flat []float64, rows agg.Rows, isMask bool) arrow.Array {
	// The values convert over the cores (SpanSize is a multiple of 8: each
	// span of bits is whole bytes, written by one worker).
	var child arrow.ArrayData
	if isMask {
		bits := make([]byte, bitutil.BytesForBits(int64(len(flat))))
		parallel.Spans(len(flat), parallel.SpanSize, func(lo, hi int) {
			for i, v := range flat[lo:hi] {
				if v != 0 {
					bitutil.SetBit(bits, lo+i)
				}
			}
		})
		child = array.NewData(arrow.FixedWidthTypes.Boolean, len(flat),
			[]*memory.Buffer{nil, memory.NewBufferBytes(bits)}, nil, 0, 0)
	} else {
		valBuf := tokenBuffer(arrow.Float32Traits.BytesRequired(len(flat)))
		defer valBuf.Release()
		vals := arrow.Float32Traits.CastFromBytes(valBuf.Bytes())
		parallel.Spans(len(flat), parallel.SpanSize, func(lo, hi int) {
			for i, v := range flat[lo:hi] {
				vals[lo+i] = float32(v)
			}
		})
		child = array.NewData(arrow.PrimitiveTypes.Float32, len(vals), []*memory.Buffer{nil, valBuf}, nil, 0, 0)
	}
	defer child.Release()
	return listOf(child, rows)
}

// listOf builds the list column of the values child laid out by rows.
func listOf(child arrow.ArrayData, rows agg.Rows) arrow.Array {
	offBuf := tokenBuffer(arrow.Int32Traits.BytesRequired(rows.N() + 1))
	defer offBuf.Release()
	offsets := arrow.Int32Traits.CastFromBytes(offBuf.Bytes())
	for i := range offsets {
		offsets[i] = int32(rows.Off[i])
	}
	data := array.NewData(arrow.ListOf(child.DataType()), rows.N(), []*memory.Buffer{nil, offBuf}, []arrow.ArrayData{child}, 0, 0)
	defer data.Release()
	return array.MakeFromData(data)
}

// fieldIndex returns the index of the first column of s named name, -1 when
// there is none.
func fieldIndex(s *arrow.Schema, name string) int {
	if idx := s.FieldIndices(name); len(idx) > 0 {
		return idx[0]
	}
	return -1
}

// validate validates the batch's rows (those of a shard were validated as
// read).
func (b *Batch) validate() error {
	if b.fileRows != nil {
		return nil
	}
	return schema.Validate(b.File, b.FileRow, b.rec, schema.ValidateOptions{AllowInvalidReward: true})
}
