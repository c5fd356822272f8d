package trinity

// Values a payload's metadata holds, as decoded from its pickle: nil (None),
// bool, int64, *big.Int (an int beyond int64), float64, string, *List,
// *Dict and Tuple. Dicts keep their insertion order. A list or dict reached
// twice in the pickle (a memo reference) is one shared object, as in Python.

// List is a Python list.
type List struct{ Items []any }

// Dict is a Python dict, in insertion order.
type Dict struct {
	Keys []any
	Vals []any
}

// Tuple is a Python tuple.
type Tuple []any

// Get returns the value of string key k and whether it is present.
func (d *Dict) Get(k string) (any, bool) {
	for i, key := range d.Keys {
		if s, ok := key.(string); ok && s == k {
			return d.Vals[i], true
		}
	}
	return nil, false
}

// Set replaces the value of string key k, or appends the pair (Python's
// d[k] = v).
func (d *Dict) Set(k string, v any) {
	for i, key := range d.Keys {
		if s, ok := key.(string); ok && s == k {
			d.Vals[i] = v
			return
		}
	}
	d.Keys = append(d.Keys, k)
	d.Vals = append(d.Vals, v)
}

// Pickle opcodes: the subset plain values use (protocols 2 to 5).
const (
	opMark            = '('
	opStop            = '.'
	opBinInt          = 'J'
	opBinInt1         = 'K'
	opBinInt2         = 'M'
	opNone            = 'N'
	opBinUnicode      = 'X'
	opAppend          = 'a'
	opEmptyDict       = '}'
	opAppends         = 'e'
	opBinGet          = 'h'
	opLongBinGet      = 'j'
	opEmptyList       = ']'
	opBinPut          = 'q'
	opLongBinPut      = 'r'
	opSetItem         = 's'
	opTuple           = 't'
	opEmptyTuple      = ')'
	opSetItems        = 'u'
	opBinFloat        = 'G'
	opProto           = 0x80
	opTuple1          = 0x85
	opTuple2          = 0x86
	opTuple3          = 0x87
	opNewTrue         = 0x88
	opNewFalse        = 0x89
	opLong1           = 0x8a
	opLong4           = 0x8b
	opShortBinUnicode = 0x8c
	opBinUnicode8     = 0x8d
	opFrame           = 0x95
	opMemoize         = 0x94
)
