package iceberg

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
)

// TestIcebergType converts Arrow types, as their String writes them, to
// Iceberg types, numbering nested fields after the column's id; an Arrow
// type without an Iceberg type is refused, naming it.
func TestIcebergType(t *testing.T) {
	for _, c := range []struct {
		arrow arrow.DataType
		want  string // JSON
	}{
		{arrow.FixedWidthTypes.Boolean, `"boolean"`},
		{arrow.PrimitiveTypes.Int16, `"int"`},
		{arrow.PrimitiveTypes.Int32, `"int"`},
		{arrow.PrimitiveTypes.Int64, `"long"`},
		{arrow.PrimitiveTypes.Uint32, `"long"`},
		{arrow.PrimitiveTypes.Float32, `"float"`},
		{arrow.PrimitiveTypes.Float64, `"double"`},
		{arrow.BinaryTypes.String, `"string"`},
		{arrow.BinaryTypes.LargeString, `"string"`},
		{arrow.BinaryTypes.Binary, `"binary"`},
		{arrow.FixedWidthTypes.Date32, `"date"`},
		{&arrow.TimestampType{Unit: arrow.Microsecond}, `"timestamp"`},
		{&arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, `"timestamptz"`},
		{arrow.ListOf(arrow.PrimitiveTypes.Int32), `{"type":"list","element-id":11,"element":"int","element-required":false}`},
		{arrow.ListOfNonNullable(arrow.PrimitiveTypes.Float32), `{"type":"list","element-id":11,"element":"float","element-required":true}`},
		{arrow.LargeListOf(arrow.BinaryTypes.String), `{"type":"list","element-id":11,"element":"string","element-required":false}`},
		{arrow.ListOf(arrow.ListOf(arrow.ListOf(arrow.PrimitiveTypes.Int32))),
			`{"type":"list","element-id":11,"element":{"type":"list","element-id":12,"element":{"type":"list","element-id":13,"element":"int","element-required":false},"element-required":false},"element-required":false}`},
		{arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64}, arrow.Field{Name: "b", Type: arrow.ListOf(arrow.BinaryTypes.String)}),
			`{"type":"struct","fields":[{"id":11,"name":"a","required":false,"type":"long"},{"id":12,"name":"b","required":false,"type":{"type":"list","element-id":13,"element":"string","element-required":false}}]}`},
	} {
		last := 10
		typ, err := icebergType(c.arrow.String(), &last)
		if err != nil {
			t.Fatalf("%s: %v", c.arrow, err)
		}
		if got, _ := json.Marshal(typ); string(got) != c.want {
			t.Errorf("%s: %s, want %s", c.arrow, got, c.want)
		}
	}
	for _, bad := range []arrow.DataType{arrow.PrimitiveTypes.Uint64, arrow.FixedWidthTypes.Float16, arrow.Null,
		&arrow.TimestampType{Unit: arrow.Nanosecond}, arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64),
		arrow.ListOf(arrow.PrimitiveTypes.Uint64)} {
		if err := CheckType(bad.String()); err == nil || !strings.Contains(err.Error(), bad.String()) {
			t.Errorf("%s: %v, want a refusal naming it", bad, err)
		}
	}
}
