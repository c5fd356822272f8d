package trinity

// Values a payload's metadata holds, as decoded from its pickle: nil (None),
// bool, int64, *big.Int (an int beyond int64), float64, string, *List,
// *Dict and Tuple. Dicts keep their insertion order. A list or dict reached
// twice in the pickle (a memo reference) is one shared object, as in Python.

// List is a Python list.
type List struct{ Items []any }

// Dict is a Python dict, in insertion order. Keys and Vals may be appended
// to directly; Get, Set and the pickle decoder find str and int keys through
// an index once the dict has indexFrom keys, so building a dict of n keys
// takes time linear in n.
type Dict struct {
	Keys []any
	Vals []any

	index   map[any]int // position of each str and int key in Keys[:indexed]
	indexed int
}

// indexFrom is the number of keys from which a dict's keys are indexed.
const indexFrom = 16

// Tuple is a Python tuple.
type Tuple []any

// find returns the position of key k, -1 when absent. Only str (string)
// and int (int64) keys are found: other keys are never equal to one
// another here.
func (d *Dict) find(k any) int {
	switch k.(type) {
	case string, int64:
	default:
		return -1
	}
	if len(d.Keys) < indexFrom {
		for i, key := range d.Keys {
			if key == k { // k is a string or an int64: == never meets a Tuple of its type
				return i
			}
		}
		return -1
	}
	if d.index == nil {
		d.index = make(map[any]int, len(d.Keys))
	}
	for ; d.indexed < len(d.Keys); d.indexed++ {
		switch key := d.Keys[d.indexed]; key.(type) {
		case string, int64:
			if _, dup := d.index[key]; !dup {
				d.index[key] = d.indexed
			}
		}
	}
	if i, ok := d.index[k]; ok {
		return i
	}
	return -1
}

// Get returns the value of string key k and whether it is present.
func (d *Dict) Get(k string) (any, bool) {
	if i := d.find(k); i >= 0 {
		return d.Vals[i], true
	}
	return nil, false
}

// Set replaces the value of key k (a str or an int), or appends the pair
// (Python's d[k] = v).
func (d *Dict) Set(k, v any) {
	if i := d.find(k); i >= 0 {
		d.Vals[i] = v
		return
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
