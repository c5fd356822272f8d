// Package leafcodec reads and writes the Parquet column chunks of the
// experience store's big columns — primitive columns and standard
// three-level lists of primitives — on arrow-go's page reader and writer,
// faster than arrow-go's general path; schema/store uses it where a column
// has one of its shapes and pqarrow everywhere else.
package leafcodec

import (
	"math/bits"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/parquet"
	pqschema "github.com/apache/arrow/go/v17/parquet/schema"
)

// The experience store's big columns are lists of primitive values (tokens,
// log-probs, masks, advantages), and arrow-go v17's general Parquet path
// spends most of a job's time on them: it turns levels into list offsets one
// level at a time (decoding) and runs a general RLE encoder over levels whose
// shape is known in advance (encoding). Decoder and Encoder are a codec for
// exactly these shapes — a primitive column, or a standard three-level list
// of primitives — that works on whole runs of levels and copies values as
// bytes. Every other shape, type or encoding goes through pqarrow.

// Shape describes a Parquet leaf column the leaf codec handles and the
// Arrow type it is read as.
type Shape struct {
	typ      arrow.DataType // the column's Arrow type: the value type or a list of it
	elem     arrow.DataType // the value type
	list     bool
	phys     parquet.Type
	width    int   // bytes per value; 0 for booleans (one bit each)
	maxDef   int16 // definition level of a present value
	emptyDef int16 // an empty list (lists only)
	nullDef  int16 // a null list, or a null flat value (-1: none can be)
	elemNull int16 // a null list element (-1: none can be)
	defBits  int   // bit widths of the levels
	repBits  int
}

// ShapeOf returns the leaf codec's shape for Parquet leaf col read as Arrow
// type t, and false when the codec does not handle it (pqarrow does).
func ShapeOf(col *pqschema.Column, t arrow.DataType) (Shape, bool) {
	s := Shape{typ: t, elem: t, nullDef: -1, elemNull: -1}
	path := col.ColumnPath()
	if l, ok := t.(*arrow.ListType); ok {
		s.list, s.elem = true, l.Elem()
		if len(path) != 3 || col.MaxRepetitionLevel() != 1 {
			return s, false
		}
	} else if len(path) != 1 || col.MaxRepetitionLevel() != 0 {
		return s, false
	}
	switch {
	case s.elem.ID() == arrow.FLOAT32 && col.PhysicalType() == parquet.Types.Float:
		s.width = 4
	case s.elem.ID() == arrow.FLOAT64 && col.PhysicalType() == parquet.Types.Double:
		s.width = 8
	case s.elem.ID() == arrow.INT32 && col.PhysicalType() == parquet.Types.Int32:
		s.width = 4
	case s.elem.ID() == arrow.INT64 && col.PhysicalType() == parquet.Types.Int64:
		s.width = 8
	case s.elem.ID() == arrow.BOOL && col.PhysicalType() == parquet.Types.Boolean:
	default:
		return s, false
	}
	s.phys = col.PhysicalType()
	s.maxDef = col.MaxDefinitionLevel()
	leafOptional := col.SchemaNode().RepetitionType() == parquet.Repetitions.Optional
	var opt int16 // 1 when the leaf itself is optional
	if leafOptional {
		opt = 1
	}
	if !s.list {
		if leafOptional {
			s.nullDef = 0
		}
		if s.maxDef != opt {
			return s, false
		}
	} else {
		if leafOptional {
			s.elemNull = s.maxDef - 1
		}
		repeatedDef := s.maxDef - opt
		s.emptyDef = repeatedDef - 1
		switch s.emptyDef {
		case 1:
			s.nullDef = 0 // the list itself is optional
		case 0:
		default:
			return s, false
		}
		s.repBits = 1
	}
	s.defBits = bits.Len16(uint16(s.maxDef))
	return s, true
}
