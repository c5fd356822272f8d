package store

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/rftpipe/rftpipe/schema"
)

// JSONL stores hold one Trinity-style experience per line:
//
//	{"eid": {"batch": 0, "task": 3, "run": 1, "step": 0, "suffix": "a1b2c3"},
//	 "reward": 1.0, "prompt_length": 4, "tokens": [...], "logprobs": [...],
//	 "action_mask": [true, ...], "info": {...}, ...}
//
// Known fields get their canonical Arrow type; `batch` and `task` are int64
// or utf8 as the first record has them; `info`, `metrics` and unknown fields
// are kept as JSON text. The first record fixes the columns: a later record
// may leave a field out (null) but not bring a new one.

type jsonlSource struct {
	path  string
	f     *os.File
	sc    *bufio.Scanner
	mem   memory.Allocator
	rows  int
	line  int64
	first map[string]json.RawMessage // the record that fixed the schema, not yet emitted
	s     *arrow.Schema
	want  []string
	bld   *array.RecordBuilder
	cur   arrow.Record
}

const maxLine = 256 << 20

func openJSONL(path string, cfg readConfig) (source, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fileError(path, err, "cannot open")
	}
	kept := false
	defer closeUnless(&kept, f)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), maxLine)
	j := &jsonlSource{path: path, f: f, sc: sc, mem: cfg.mem, rows: cfg.batchRows, want: cfg.columns}
	rec, err := j.readLine()
	if err == io.EOF {
		return nil, schema.Errorf(path, -1, "", "empty store: no experience records")
	}
	if err != nil {
		return nil, err
	}
	kept = true
	j.first = rec
	j.s = jsonlSchema(rec, cfg.columns)
	j.bld = array.NewRecordBuilder(cfg.mem, j.s)
	return j, nil
}

// readLine returns the next non-blank line decoded, with the eid flattened.
func (j *jsonlSource) readLine() (map[string]json.RawMessage, error) {
	for j.sc.Scan() {
		j.line++
		b := bytes.TrimSpace(j.sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var rec map[string]json.RawMessage
		if err := json.Unmarshal(b, &rec); err != nil {
			// Python's json.dumps writes NaN/Infinity bare; accept them.
			if err2 := json.Unmarshal(quotePythonFloats(b), &rec); err2 != nil {
				return nil, schema.Errorf(j.path, j.line-1, "", "line %d is not a JSON object: %v", j.line, err)
			}
		}
		if raw, ok := rec["eid"]; ok {
			var eid map[string]json.RawMessage
			if err := json.Unmarshal(raw, &eid); err != nil {
				return nil, schema.Errorf(j.path, j.line-1, "eid", "not an object")
			}
			delete(rec, "eid")
			for k, v := range eid {
				rec[k] = v
			}
		}
		return rec, nil
	}
	if err := j.sc.Err(); err != nil {
		return nil, fileError(j.path, err, "read failed at line %d", j.line+1)
	}
	return nil, io.EOF
}

// jsonlSchema derives the columns from the first record: known columns in
// canonical order, then unknown ones sorted by name, as JSON text.
func jsonlSchema(rec map[string]json.RawMessage, want []string) *arrow.Schema {
	var fields []arrow.Field
	for _, n := range schema.Order {
		raw, ok := rec[n]
		if !ok || (len(want) > 0 && !contains(want, n)) {
			continue
		}
		f := schema.Field(n)
		if (n == schema.Batch || n == schema.Task) && len(raw) > 0 && raw[0] == '"' {
			f.Type = arrow.BinaryTypes.String
		}
		fields = append(fields, f)
	}
	var extra []string
	for k := range rec {
		if _, known := schema.Type(k); !known && (len(want) == 0 || contains(want, k)) {
			extra = append(extra, k)
		}
	}
	sortStrings(extra)
	for _, k := range extra {
		fields = append(fields, arrow.Field{Name: k, Type: arrow.BinaryTypes.String, Nullable: true})
	}
	return arrow.NewSchema(fields, nil)
}

func (j *jsonlSource) Schema() *arrow.Schema { return j.s }

func (j *jsonlSource) Next() (arrow.Record, error) {
	if j.cur != nil {
		j.cur.Release()
		j.cur = nil
	}
	n := 0
	for n < j.rows {
		rec := j.first
		j.first = nil
		if rec == nil {
			var err error
			if rec, err = j.readLine(); err == io.EOF {
				break
			} else if err != nil {
				return nil, err
			}
		}
		if err := j.append(rec); err != nil {
			return nil, err
		}
		n++
	}
	if n == 0 {
		return nil, io.EOF
	}
	j.cur = j.bld.NewRecord()
	return j.cur, nil
}

func (j *jsonlSource) append(rec map[string]json.RawMessage) error {
	row := j.line - 1
	for k := range rec {
		if len(j.s.FieldIndices(k)) == 0 && (len(j.want) == 0 || contains(j.want, k)) {
			return schema.Errorf(j.path, row, k, "field not present in the first record")
		}
	}
	for i, f := range j.s.Fields() {
		raw, ok := rec[f.Name]
		if err := appendJSON(j.bld.Field(i), f, raw, ok); err != nil {
			return schema.Errorf(j.path, row, f.Name, "%v", err)
		}
	}
	return nil
}

func isNull(raw json.RawMessage, ok bool) bool {
	return !ok || len(raw) == 0 || string(raw) == "null"
}

// appendJSON appends one JSON value to a builder of the field's type.
func appendJSON(b array.Builder, f arrow.Field, raw json.RawMessage, ok bool) error {
	if isNull(raw, ok) {
		b.AppendNull()
		return nil
	}
	switch bb := b.(type) {
	case *array.Int64Builder:
		var v int64
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("want an integer, got %s", clip(raw))
		}
		bb.Append(v)
	case *array.Int32Builder:
		var v int32
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("want an integer, got %s", clip(raw))
		}
		bb.Append(v)
	case *array.Float64Builder:
		v, err := jsonFloat(raw)
		if err != nil {
			return err
		}
		bb.Append(v)
	case *array.StringBuilder:
		if f.Name == schema.Info || f.Name == schema.Metrics || raw[0] != '"' {
			if _, known := schema.Type(f.Name); known && f.Name != schema.Info && f.Name != schema.Metrics && f.Name != schema.Batch && f.Name != schema.Task {
				return fmt.Errorf("want a string, got %s", clip(raw))
			}
			if f.Name == schema.Batch || f.Name == schema.Task {
				return fmt.Errorf("want a string id like the first record's, got %s", clip(raw))
			}
			bb.Append(string(raw)) // JSON text
			return nil
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return err
		}
		bb.Append(s)
	case *array.ListBuilder:
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return fmt.Errorf("want a list, got %s", clip(raw))
		}
		bb.Append(true)
		vb := bb.ValueBuilder()
		for _, it := range items {
			if err := appendElem(vb, it); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("unsupported column type %s", f.Type)
	}
	return nil
}

func appendElem(b array.Builder, raw json.RawMessage) error {
	switch bb := b.(type) {
	case *array.Int32Builder:
		var v int32
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("want integer list items, got %s", clip(raw))
		}
		bb.Append(v)
	case *array.Float32Builder:
		v, err := jsonFloat(raw)
		if err != nil {
			return err
		}
		bb.Append(float32(v))
	case *array.BooleanBuilder:
		switch string(raw) {
		case "true", "1", "1.0":
			bb.Append(true)
		case "false", "0", "0.0":
			bb.Append(false)
		default:
			return fmt.Errorf("want boolean (or 0/1) mask items, got %s", clip(raw))
		}
	}
	return nil
}

// jsonFloat decodes a number; Python's NaN/Infinity spellings are accepted so
// that invalid rewards reach validation with a clear message.
func jsonFloat(raw json.RawMessage) (float64, error) {
	switch string(raw) {
	case `"nan"`:
		return math.NaN(), nil
	case `"inf"`:
		return math.Inf(1), nil
	case `"-inf"`:
		return math.Inf(-1), nil
	}
	v, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return 0, fmt.Errorf("want a number, got %s", clip(raw))
	}
	return v, nil
}

// quotePythonFloats rewrites the bare tokens NaN, Infinity and -Infinity
// outside strings as the strings "nan", "inf" and "-inf".
func quotePythonFloats(b []byte) []byte {
	out := make([]byte, 0, len(b)+16)
	inStr := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inStr {
			out = append(out, c)
			if c == '\\' && i+1 < len(b) {
				i++
				out = append(out, b[i])
			} else if c == '"' {
				inStr = false
			}
			continue
		}
		switch {
		case c == '"':
			inStr = true
			out = append(out, c)
		case bytes.HasPrefix(b[i:], []byte("NaN")):
			out = append(out, `"nan"`...)
			i += 2
		case bytes.HasPrefix(b[i:], []byte("-Infinity")):
			out = append(out, `"-inf"`...)
			i += 8
		case bytes.HasPrefix(b[i:], []byte("Infinity")):
			out = append(out, `"inf"`...)
			i += 7
		default:
			out = append(out, c)
		}
	}
	return out
}

func clip(raw []byte) string {
	if len(raw) > 40 {
		return string(raw[:40]) + "…"
	}
	return string(raw)
}

func (j *jsonlSource) Close() error {
	if j.cur != nil {
		j.cur.Release()
	}
	j.bld.Release()
	return j.f.Close()
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for k := i; k > 0 && s[k] < s[k-1]; k-- {
			s[k], s[k-1] = s[k-1], s[k]
		}
	}
}

// jsonlSink writes one experience object per line, ids nested under "eid".
type jsonlSink struct {
	w   io.Writer
	s   *arrow.Schema
	buf []byte
}

func newJSONLSink(w io.Writer, s *arrow.Schema) sink { return &jsonlSink{w: w, s: s} }

var eidFields = map[string]bool{schema.Batch: true, schema.Task: true, schema.Run: true, schema.Step: true, schema.Suffix: true}

func (j *jsonlSink) Write(rec arrow.Record) error {
	for r := 0; r < int(rec.NumRows()); r++ {
		b := append(j.buf[:0], '{')
		first := true
		key := func(name string) {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = strconv.AppendQuote(b, name)
			b = append(b, ':')
		}
		// eid first
		hasEID := false
		for i, f := range j.s.Fields() {
			if !eidFields[f.Name] {
				continue
			}
			if !hasEID {
				key("eid")
				b = append(b, '{')
				first = true
				hasEID = true
			}
			key(f.Name)
			b = appendValue(b, rec.Column(i), r, false)
		}
		if hasEID {
			b = append(b, '}')
			first = false
		}
		for i, f := range j.s.Fields() {
			if eidFields[f.Name] {
				continue
			}
			key(f.Name)
			raw := f.Name == schema.Info || f.Name == schema.Metrics
			b = appendValue(b, rec.Column(i), r, raw)
		}
		b = append(b, '}', '\n')
		j.buf = b
		if _, err := j.w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// appendValue renders element r of arr as JSON. rawJSON embeds strings that
// hold valid JSON text as is (info, metrics).
func appendValue(b []byte, arr arrow.Array, r int, rawJSON bool) []byte {
	if arr.IsNull(r) {
		return append(b, "null"...)
	}
	switch a := arr.(type) {
	case *array.Int64:
		return strconv.AppendInt(b, a.Value(r), 10)
	case *array.Int32:
		return strconv.AppendInt(b, int64(a.Value(r)), 10)
	case *array.Float64:
		return appendFloat(b, a.Value(r), 64)
	case *array.Float32:
		return appendFloat(b, float64(a.Value(r)), 32)
	case *array.Boolean:
		return strconv.AppendBool(b, a.Value(r))
	case *array.String:
		s := a.Value(r)
		if rawJSON && json.Valid([]byte(s)) {
			return append(b, s...)
		}
		return strconv.AppendQuote(b, s)
	case *array.List:
		lo, hi := a.ValueOffsets(r)
		vals := a.ListValues()
		b = append(b, '[')
		for k := lo; k < hi; k++ {
			if k > lo {
				b = append(b, ',')
			}
			b = appendValue(b, vals, int(k), false)
		}
		return append(b, ']')
	default:
		return strconv.AppendQuote(b, arr.ValueStr(r))
	}
}

func appendFloat(b []byte, v float64, bits int) []byte {
	switch {
	case math.IsNaN(v):
		return append(b, `"nan"`...)
	case math.IsInf(v, 1):
		return append(b, `"inf"`...)
	case math.IsInf(v, -1):
		return append(b, `"-inf"`...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, bits)
}

func (j *jsonlSink) Close() error { return nil }
