package store

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet/file"
	pqschema "github.com/apache/arrow/go/v17/parquet/schema"

	"github.com/rftpipe/rftpipe/schema"
)

// textLeaf is a Parquet logical type that holds text but that pqarrow reads
// as bytes. DuckDB writes its JSON columns as BYTE_ARRAY annotated JSON
// (pqarrow: binary) and its UUID columns as FIXED_LEN_BYTE_ARRAY(16)
// annotated UUID (pqarrow: fixed_size_binary[16]); the store reads both as
// utf8: JSON as its text (marked JSONTextKey, so JSONL writes it as JSON),
// a UUID in its canonical form (8-4-4-4-12 lowercase hex digits), as DuckDB
// prints it. Its other types need nothing here: ENUM is BYTE_ARRAY
// annotated STRING, timestamps with time zone are INT64 annotated
// TIMESTAMP(isAdjustedToUTC) (timestamp with zone UTC), and HUGEINT is
// written as DOUBLE (normalise casts a known integer column from it, exact
// values only).
type textLeaf int8

const (
	notText textLeaf = iota
	jsonText
	uuidText
)

// textLeaves returns, for each field of sc (as pqarrow reads them, planned
// by plans), the text its one top-level leaf holds, and sc with those
// fields as utf8; nil and sc when no field holds text.
func textLeaves(pf *file.Reader, plans []fieldPlan, sc *arrow.Schema) ([]textLeaf, *arrow.Schema) {
	psc := pf.MetaData().Schema
	kinds := make([]textLeaf, len(plans))
	fields := sc.Fields()
	found := false
	for i, p := range plans {
		if len(p.leaves) != 1 || psc.Column(p.leaves[0]).MaxRepetitionLevel() != 0 {
			continue
		}
		switch lt := psc.Column(p.leaves[0]).LogicalType(); {
		case lt.Equals(pqschema.JSONLogicalType{}) && fields[i].Type.ID() == arrow.BINARY:
			kinds[i] = jsonText
			md := fields[i].Metadata
			fields[i].Metadata = arrow.NewMetadata(append(slices.Clip(md.Keys()), JSONTextKey), append(slices.Clip(md.Values()), "true"))
		case lt.Equals(pqschema.UUIDLogicalType{}) && arrow.TypeEqual(fields[i].Type, &arrow.FixedSizeBinaryType{ByteWidth: 16}):
			kinds[i] = uuidText
		default:
			continue
		}
		fields[i].Type = arrow.BinaryTypes.String
		found = true
	}
	if !found {
		return nil, sc
	}
	md := sc.Metadata()
	return kinds, arrow.NewSchema(fields, &md)
}

// asText converts a column read as bytes to the text its logical type
// holds. On a value that is not such text it returns the index of its row
// and the reason.
func asText(kind textLeaf, a arrow.Array, mem memory.Allocator) (arrow.Array, int, error) {
	b := array.NewStringBuilder(mem)
	defer b.Release()
	b.Reserve(a.Len())
	for i := 0; i < a.Len(); i++ {
		if a.IsNull(i) {
			b.AppendNull()
			continue
		}
		switch kind {
		case jsonText:
			v := a.(*array.Binary).Value(i)
			if !utf8.Valid(v) || !json.Valid(v) {
				return nil, i, fmt.Errorf("a JSON value that is not valid UTF-8 JSON text")
			}
			b.BinaryBuilder.Append(v)
		case uuidText:
			b.Append(uuidString(a.(*array.FixedSizeBinary).Value(i)))
		}
	}
	return b.NewArray(), 0, nil
}

// uuidString renders 16 bytes as a UUID's canonical text.
func uuidString(u []byte) string {
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], u[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], u[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], u[8:10])
	s[23] = '-'
	hex.Encode(s[24:36], u[10:16])
	return string(s[:])
}

// toText converts the columns of a batch that hold text (p.text), read as
// bytes, in place; an error names the file, row and column.
func (p *parquetSource) toText(cols []arrow.Array) error {
	for i, k := range p.text {
		if k == notText {
			continue
		}
		a, row, err := asText(k, cols[i], memory.DefaultAllocator)
		if err != nil {
			return schema.Errorf(p.path, p.read+p.skipped+int64(row), p.sc.Field(i).Name, "%v", err)
		}
		cols[i].Release()
		cols[i] = a
	}
	return nil
}
