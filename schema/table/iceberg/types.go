package iceberg

import (
	"fmt"
	"strings"
)

// Field is a field of an Iceberg schema (a column, or a struct's field).
type Field struct {
	ID       int    `json:"id"`
	Name     string `json:"name"`
	Required bool   `json:"required"`
	Type     any    `json:"type"` // a primitive's name, *ListType or *StructType
}

// ListType is an Iceberg list.
type ListType struct {
	Type            string `json:"type"` // "list"
	ElementID       int    `json:"element-id"`
	Element         any    `json:"element"`
	ElementRequired bool   `json:"element-required"`
}

// StructType is an Iceberg struct.
type StructType struct {
	Type   string  `json:"type"` // "struct"
	Fields []Field `json:"fields"`
}

// primitives maps Arrow types (as arrow.DataType's String) to the Iceberg
// primitive types that read their Parquet columns.
var primitives = map[string]string{
	"bool": "boolean",
	"int8": "int", "int16": "int", "int32": "int", "uint8": "int", "uint16": "int",
	"int64": "long", "uint32": "long",
	"float32": "float", "float64": "double",
	"utf8": "string", "large_utf8": "string",
	"binary": "binary", "large_binary": "binary",
	"date32":        "date",
	"timestamp[us]": "timestamp",
}

// CheckType reports whether an Arrow type (as arrow.DataType's String) has
// an Iceberg type: a column of a table must have one.
func CheckType(arrowType string) error {
	_, err := icebergType(arrowType, new(int))
	return err
}

// icebergType converts an Arrow type, as arrow.DataType's String writes
// it, to an Iceberg type, numbering the fields it nests from *last+1.
func icebergType(t string, last *int) (any, error) {
	p := &typeParser{s: t, last: last}
	typ, err := p.parse()
	if err == nil && p.s != "" {
		err = fmt.Errorf("unexpected %q", p.s)
	}
	if err != nil {
		return nil, fmt.Errorf("Arrow type %s has no Iceberg type: %v", t, err)
	}
	return typ, nil
}

// typeParser reads an Arrow type's String.
type typeParser struct {
	s    string
	last *int
}

func (p *typeParser) parse() (any, error) {
	for _, list := range []string{"list<", "large_list<"} {
		if strings.HasPrefix(p.s, list) {
			p.s = p.s[len(list):]
			return p.list()
		}
	}
	if strings.HasPrefix(p.s, "struct<") {
		p.s = p.s[len("struct<"):]
		return p.structType()
	}
	if strings.HasPrefix(p.s, "timestamp[us, tz=") {
		i := strings.IndexByte(p.s, ']')
		if i < 0 {
			return nil, fmt.Errorf("unterminated %q", p.s)
		}
		p.s = p.s[i+1:]
		return "timestamptz", nil
	}
	n := len(p.s)
	if i := strings.IndexAny(p.s, ",>"); i >= 0 {
		n = i
	}
	name := p.s[:n]
	prim, ok := primitives[name]
	if !ok {
		return nil, fmt.Errorf("no Iceberg type for %s", name)
	}
	p.s = p.s[n:]
	return prim, nil
}

// list reads "NAME: T, nullable>" or "NAME: T>".
func (p *typeParser) list() (any, error) {
	i := strings.Index(p.s, ": ")
	if i < 0 {
		return nil, fmt.Errorf("list without an element: %q", p.s)
	}
	p.s = p.s[i+2:]
	*p.last++
	l := &ListType{Type: "list", ElementID: *p.last}
	elem, err := p.parse()
	if err != nil {
		return nil, err
	}
	l.Element = elem
	if strings.HasPrefix(p.s, ", nullable>") {
		p.s = p.s[len(", nullable>"):]
	} else if strings.HasPrefix(p.s, ">") {
		p.s = p.s[1:]
		l.ElementRequired = true
	} else {
		return nil, fmt.Errorf("unterminated list at %q", p.s)
	}
	return l, nil
}

// structType reads "a: T, b: T>"; its fields are optional (Arrow's String
// does not say).
func (p *typeParser) structType() (any, error) {
	st := &StructType{Type: "struct", Fields: []Field{}}
	for !strings.HasPrefix(p.s, ">") {
		if len(st.Fields) > 0 {
			if !strings.HasPrefix(p.s, ", ") {
				return nil, fmt.Errorf("unterminated struct at %q", p.s)
			}
			p.s = p.s[2:]
		}
		i := strings.Index(p.s, ": ")
		if i < 0 {
			return nil, fmt.Errorf("struct field without a type: %q", p.s)
		}
		*p.last++
		f := Field{ID: *p.last, Name: p.s[:i]}
		p.s = p.s[i+2:]
		typ, err := p.parse()
		if err != nil {
			return nil, err
		}
		f.Type = typ
		st.Fields = append(st.Fields, f)
	}
	p.s = p.s[1:]
	return st, nil
}

// MappedField is an entry of an Iceberg name mapping
// (schema.name-mapping.default): the names a field has in data files that
// carry no field ids.
type MappedField struct {
	FieldID int           `json:"field-id"`
	Names   []string      `json:"names"`
	Fields  []MappedField `json:"fields,omitempty"`
}

// nameMapping returns the name mapping of fields: each by its name; a
// list's element by "element" (Parquet's name for it) and "item"
// (Arrow's).
func nameMapping(fields []Field) []MappedField {
	out := make([]MappedField, len(fields))
	for i, f := range fields {
		out[i] = MappedField{FieldID: f.ID, Names: []string{f.Name}, Fields: nested(f.Type)}
	}
	return out
}

// nested returns the name mapping of the fields a type nests.
func nested(t any) []MappedField {
	switch t := t.(type) {
	case *ListType:
		return []MappedField{{FieldID: t.ElementID, Names: []string{"element", "item"}, Fields: nested(t.Element)}}
	case *StructType:
		return nameMapping(t.Fields)
	}
	return nil
}
