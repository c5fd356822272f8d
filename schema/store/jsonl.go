package store

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"unicode/utf8"

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
// The reader scans the file once before it reads it, to learn every field
// (a field may first appear on any line, and a record may leave any field
// out: Trinity's to_dict omits a None reward) and to count the records it
// must then read. Known fields get their canonical Arrow type; `batch` and
// `task` are int64, or utf8 when any record has a string id (integers then
// read as their decimal text: keys compare as strings). Whole-number floats
// (`"run": 0.0`) read as integers. `info`, `metrics` and unknown fields that
// hold objects, lists or mixed kinds are kept as JSON text (see JSONText);
// unknown fields holding only integers, numbers, booleans or strings get
// int64, float64, bool or utf8. Columns come in schema.Order, then the
// others sorted by name (routed_experts, a known column outside Order,
// among them with its nested-list type). A UTF-8 byte-order mark is
// skipped.

type jsonlSource struct {
	path  string
	f     handle
	sc    *bufio.Scanner
	mem   memory.Allocator
	rows  int
	line  int64
	s     *arrow.Schema
	want  []string
	bld   *array.RecordBuilder
	cur   arrow.Record
	stamp fileStamp
	total int64 // records the first pass counted
	read  int64 // records read
}

const maxLine = 256 << 20

// JSONTextKey is the field metadata key that marks a utf8 column holding
// JSON text; JSONL writers embed its values as JSON, not as strings.
const JSONTextKey = "rftpipe.json"

// JSONText reports whether a column holds JSON text: info, metrics, or a
// field marked with JSONTextKey.
func JSONText(f arrow.Field) bool {
	return f.Name == schema.Info || f.Name == schema.Metrics || f.Metadata.FindKey(JSONTextKey) >= 0
}

// JSON value kinds seen for a field by the first pass.
const (
	kindInt = 1 << iota
	kindFloat
	kindBool
	kindString
	kindOther // object or list
)

func openJSONL(path string, cfg readConfig) (source, error) {
	f, stamp, err := openHandle(cfg.ctx, path)
	if err != nil {
		return nil, err
	}
	kept := false
	defer closeUnless(&kept, f)
	j := &jsonlSource{path: path, f: f, mem: cfg.mem, rows: cfg.batchRows, want: cfg.columns, stamp: stamp}
	kinds := map[string]int{}
	for {
		rec, err := j.readLine()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		j.total++
		for k, v := range rec {
			if len(j.want) == 0 || contains(j.want, k) {
				kinds[k] |= kindOf(v)
			}
		}
	}
	if j.total == 0 {
		return nil, schema.Errorf(path, -1, "", "empty store: no experience records")
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, fileError(path, err, "cannot read")
	}
	j.sc, j.line = nil, 0
	j.s = jsonlSchema(kinds)
	j.bld = array.NewRecordBuilder(cfg.mem, j.s)
	kept = true
	return j, nil
}

// kindOf classifies one JSON value (0 for null).
func kindOf(raw json.RawMessage) int {
	if isNull(raw, true) {
		return 0
	}
	switch c := raw[0]; {
	case string(raw) == `"nan"` || string(raw) == `"inf"` || string(raw) == `"-inf"`:
		return kindFloat // a bare NaN or Infinity, quoted by readLine
	case c == '"':
		return kindString
	case c == 't' || c == 'f':
		return kindBool
	case c == '{' || c == '[':
		return kindOther
	case bytes.ContainsAny(raw, ".eE"):
		return kindFloat
	}
	return kindInt
}

// readLine returns the next non-blank line decoded, with the eid flattened.
func (j *jsonlSource) readLine() (map[string]json.RawMessage, error) {
	if j.sc == nil {
		j.sc = bufio.NewScanner(j.f)
		j.sc.Buffer(make([]byte, 1<<20), maxLine)
	}
	for j.sc.Scan() {
		j.line++
		b := j.sc.Bytes()
		if j.line == 1 {
			b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")) // a UTF-8 byte-order mark
		}
		b = bytes.TrimSpace(b)
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
		if !utf8.Valid(b) || loneSurrogate(b) {
			return nil, badText(j.path, j.line-1, rec)
		}
		return rec, nil
	}
	if err := j.sc.Err(); errors.Is(err, bufio.ErrTooLong) {
		return nil, schema.Errorf(j.path, j.line, "", "line %d is longer than the %d MiB limit of a JSONL record", j.line+1, maxLine>>20)
	} else if err != nil {
		return nil, fileError(j.path, err, "read failed at line %d", j.line+1)
	}
	return nil, io.EOF
}

// badText is the error of a line holding bytes that are not UTF-8, or a
// \uD800-style escape of a lone UTF-16 surrogate: JSON decoding would turn
// either into U+FFFD and so change (and possibly merge) ids and text, so
// the line is refused, naming the first field (in name order) whose value
// holds them.
func badText(path string, row int64, rec map[string]json.RawMessage) error {
	keys := make([]string, 0, len(rec))
	for k := range rec {
		keys = append(keys, k)
	}
	sortStrings(keys)
	for _, k := range keys {
		switch v := rec[k]; {
		case !utf8.Valid(v):
			return schema.Errorf(path, row, k, "invalid UTF-8 in %q (decoding would alter the bytes)", clip(v))
		case loneSurrogate(v):
			return schema.Errorf(path, row, k, "a \\u escape of a lone UTF-16 surrogate in %s (no character: decoding would alter the text)", clip(v))
		}
	}
	return schema.Errorf(path, row, "", "a field name holds invalid UTF-8 or a lone surrogate escape")
}

// loneSurrogate reports whether JSON text b holds a \u escape of a UTF-16
// surrogate that is not half of a high-low pair.
func loneSurrogate(b []byte) bool {
	if !bytes.Contains(b, []byte(`\u`)) {
		return false
	}
	for i := 0; i+1 < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		if b[i+1] != 'u' {
			i++ // \\, \" and the like: the next byte is no escape
			continue
		}
		r, ok := hex4(b[i+2:])
		switch {
		case !ok || r < 0xD800 || r > 0xDFFF:
		case r >= 0xDC00:
			return true // a low surrogate first
		default:
			if len(b) < i+12 || b[i+6] != '\\' || b[i+7] != 'u' {
				return true
			}
			if lo, ok := hex4(b[i+8:]); !ok || lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 6
		}
		i += 5
	}
	return false
}

// hex4 parses the four hex digits at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// jsonlSchema derives the columns from the kinds of values each field holds:
// known columns in canonical order, then unknown ones sorted by name.
func jsonlSchema(kinds map[string]int) *arrow.Schema {
	var fields []arrow.Field
	for _, n := range schema.Order {
		k, ok := kinds[n]
		if !ok {
			continue
		}
		f := schema.Field(n)
		if (n == schema.Batch || n == schema.Task) && k&kindString != 0 {
			f.Type = arrow.BinaryTypes.String
		}
		fields = append(fields, f)
	}
	var extra []string
	for k := range kinds {
		if !contains(schema.Order, k) {
			extra = append(extra, k)
		}
	}
	sortStrings(extra)
	for _, k := range extra {
		f := arrow.Field{Name: k, Nullable: true}
		if _, known := schema.Type(k); known {
			fields = append(fields, schema.Field(k))
			continue
		}
		switch kinds[k] {
		case kindInt:
			f.Type = arrow.PrimitiveTypes.Int64
		case kindFloat, kindInt | kindFloat:
			f.Type = arrow.PrimitiveTypes.Float64
		case kindBool:
			f.Type = arrow.FixedWidthTypes.Boolean
		case kindString:
			f.Type = arrow.BinaryTypes.String
		default: // objects, lists, mixed kinds, or only nulls
			f.Type = arrow.BinaryTypes.String
			f.Metadata = arrow.NewMetadata([]string{JSONTextKey}, []string{"true"})
		}
		fields = append(fields, f)
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
		rec, err := j.readLine()
		if err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		if j.read == j.total {
			return nil, schema.Errorf(j.path, j.line-1, "", "file changed while it was read: more than the %d records it held", j.total)
		}
		if err := j.append(rec); err != nil {
			return nil, err
		}
		j.read++
		n++
	}
	if n == 0 {
		if j.read != j.total {
			return nil, schema.Errorf(j.path, -1, "", "file changed while it was read: %d of its %d records left", j.read, j.total)
		}
		if err := j.stamp.check(j.path); err != nil {
			return nil, err
		}
		return nil, io.EOF
	}
	j.cur = j.bld.NewRecord()
	return j.cur, nil
}

func (j *jsonlSource) append(rec map[string]json.RawMessage) error {
	row := j.line - 1
	for k := range rec {
		if len(j.s.FieldIndices(k)) == 0 && (len(j.want) == 0 || contains(j.want, k)) {
			return schema.Errorf(j.path, row, k, "file changed while it was read: field not seen before")
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
		v, err := jsonInt(raw, math.MinInt64, math.MaxInt64)
		if err != nil {
			return err
		}
		bb.Append(v)
	case *array.Int32Builder:
		v, err := jsonInt(raw, math.MinInt32, math.MaxInt32)
		if err != nil {
			return err
		}
		bb.Append(int32(v))
	case *array.Float64Builder:
		v, err := jsonFloat(raw)
		if err != nil {
			return err
		}
		bb.Append(v)
	case *array.BooleanBuilder:
		v, err := jsonBool(raw)
		if err != nil {
			return err
		}
		bb.Append(v)
	case *array.StringBuilder:
		if JSONText(f) {
			bb.Append(string(raw))
			return nil
		}
		if raw[0] != '"' {
			if f.Name != schema.Batch && f.Name != schema.Task {
				return fmt.Errorf("want a string, got %s", clip(raw))
			}
			// an integer id among string ids: its decimal text
			v, err := jsonInt(raw, math.MinInt64, math.MaxInt64)
			if err != nil {
				return fmt.Errorf("want a string or integer id, got %s", clip(raw))
			}
			bb.Append(strconv.FormatInt(v, 10))
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
			if _, nested := vb.(*array.ListBuilder); nested && !isNull(it, true) {
				if err := appendJSON(vb, f, it, true); err != nil {
					return err
				}
				continue
			}
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
	case *array.ListBuilder:
		return fmt.Errorf("want a list item, got %s", clip(raw))
	case *array.Int16Builder:
		v, err := jsonInt(raw, math.MinInt16, math.MaxInt16)
		if err != nil {
			return fmt.Errorf("list item: %v", err)
		}
		bb.Append(int16(v))
	case *array.Int32Builder:
		v, err := jsonInt(raw, math.MinInt32, math.MaxInt32)
		if err != nil {
			return fmt.Errorf("list item: %v", err)
		}
		bb.Append(int32(v))
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

// jsonInt decodes an integer in [lo, hi]; a whole-number float (0.0, 1e3)
// is one.
func jsonInt(raw json.RawMessage, lo, hi int64) (int64, error) {
	v, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(string(raw), 64)
		if ferr != nil || f != math.Trunc(f) || f < -(1<<63) || f >= 1<<63 {
			return 0, fmt.Errorf("want an integer, got %s", clip(raw))
		}
		v = int64(f)
	}
	if v < lo || v > hi {
		return 0, fmt.Errorf("%d is out of range [%d, %d]", v, lo, hi)
	}
	return v, nil
}

func jsonBool(raw json.RawMessage) (bool, error) {
	switch string(raw) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("want a boolean, got %s", clip(raw))
}

// jsonFloat decodes a number; Python's NaN/Infinity spellings are accepted so
// that invalid rewards reach validation with a clear message.
func jsonFloat(raw json.RawMessage) (float64, error) {
	switch string(raw) {
	case `"nan"`, `"NaN"`:
		return math.NaN(), nil
	case `"inf"`, `"Infinity"`:
		return math.Inf(1), nil
	case `"-inf"`, `"-Infinity"`:
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
