package store

import (
	"encoding/json"
	"io"
	"math"
	"strconv"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"

	"github.com/rftpipe/rftpipe/schema"
)

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
			b = appendValue(b, rec.Column(i), r, JSONText(f))
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
	case *array.Int64, *array.Int32, *array.Int16:
		return schema.AppendID(b, a, r) // decimal, as ids render
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

// appendFloat renders v as Python's json.dumps does: NaN, Infinity and
// -Infinity bare (Trinity's readers and rftpipe's take them back).
func appendFloat(b []byte, v float64, bits int) []byte {
	switch {
	case math.IsNaN(v):
		return append(b, "NaN"...)
	case math.IsInf(v, 1):
		return append(b, "Infinity"...)
	case math.IsInf(v, -1):
		return append(b, "-Infinity"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, bits)
}

func (j *jsonlSink) Close() error { return nil }
