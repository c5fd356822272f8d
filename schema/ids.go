package schema

import (
	"slices"
	"strconv"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
)

// AppendID appends the string rendering of id column a at row i to dst, as
// upstream renders eid parts (Python str()): integers in decimal, strings as
// they are. So task 0 and task "0" render alike and fall into one group.
func AppendID(dst []byte, a arrow.Array, i int) []byte {
	switch c := a.(type) {
	case *array.Int64:
		return strconv.AppendInt(dst, c.Value(i), 10)
	case *array.Int32:
		return strconv.AppendInt(dst, int64(c.Value(i)), 10)
	case *array.Int16:
		return strconv.AppendInt(dst, int64(c.Value(i)), 10)
	case *array.Int8:
		return strconv.AppendInt(dst, int64(c.Value(i)), 10)
	case *array.Uint64:
		return strconv.AppendUint(dst, c.Value(i), 10)
	case *array.Uint32:
		return strconv.AppendUint(dst, uint64(c.Value(i)), 10)
	case *array.Uint16:
		return strconv.AppendUint(dst, uint64(c.Value(i)), 10)
	case *array.Uint8:
		return strconv.AppendUint(dst, uint64(c.Value(i)), 10)
	case *array.String:
		return append(dst, c.Value(i)...)
	case *array.LargeString:
		return append(dst, c.Value(i)...)
	}
	return append(dst, a.ValueStr(i)...)
}

// AppendKey appends a key of the given id columns at row i (tid = batch,
// task; rid = batch, task, run), unambiguous whatever the ids hold: every
// part but the last is its rendering's length, ':', the rendering and '/',
// so batch "0", task "a/b" (1:0/a/b) and batch "0/a", task "b" (3:0/a/b) are
// two keys.
func AppendKey(dst []byte, i int, cols ...arrow.Array) []byte {
	for k, c := range cols {
		if k == len(cols)-1 {
			return AppendID(dst, c, i)
		}
		// The rendering, then its length and ':' moved in before it.
		start := len(dst)
		dst = AppendID(dst, c, i)
		var n [24]byte
		head := append(strconv.AppendInt(n[:0], int64(len(dst)-start), 10), ':')
		dst = append(slices.Insert(dst, start, head...), '/')
	}
	return dst
}
