package trinity

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
)

// opNames names the opcodes that mean a class reference or another object
// that is not a plain value, for the error message.
var opNames = map[byte]string{
	'c': "GLOBAL", 0x93: "STACK_GLOBAL", 'R': "REDUCE", 'b': "BUILD", 0x81: "NEWOBJ",
	0x92: "NEWOBJ_EX", 'i': "INST", 'o': "OBJ", 'C': "SHORT_BINBYTES", 'B': "BINBYTES",
	0x8e: "BINBYTES8", 'U': "SHORT_BINSTRING", 'T': "BINSTRING", 'P': "PERSID",
	'Q': "BINPERSID", 0x96: "BYTEARRAY8", 0x8f: "EMPTY_SET", 0x90: "ADDITEMS",
	0x91: "FROZENSET", 0x82: "EXT1", 0x83: "EXT2", 0x84: "EXT4",
}

// notPlainError reports an opcode outside plain values, with the item key
// (an entry of itemKeys) whose value held it, when it can be told.
type notPlainError struct {
	op  string
	at  int
	key string
}

func (e *notPlainError) Error() string {
	return fmt.Sprintf("pickle opcode %s at byte %d: a class reference or an object other than dict, list, tuple, str, int, float, bool and None", e.op, e.at)
}

// pendingKey returns the innermost item key whose value was being built
// when decoding stopped: dict entries lie on the stack as key, value pairs
// after the MARK that follows their dict.
func pendingKey(stack []any) string {
	key := ""
	for i := 1; i < len(stack); i++ {
		if _, ok := stack[i].(markObj); !ok {
			continue
		}
		if _, ok := stack[i-1].(*Dict); !ok {
			continue
		}
		end := i + 1
		for end < len(stack) {
			if _, ok := stack[end].(markObj); ok {
				break
			}
			end++
		}
		for p := i + 1; p < end; p += 2 {
			if s, ok := stack[p].(string); ok && itemKeys[s] {
				key = s
			}
		}
	}
	return key
}

// interned are the strings every payload repeats (keys and common values):
// decoding them allocates nothing.
var interned = func() map[string]string {
	m := map[string]string{}
	for _, s := range append(append(itemKeyOrder[:len(itemKeyOrder):len(itemKeyOrder)],
		"version", "num_items", "items", "batch", "task", "run", "step", "suffix",
		"model_version", "use_count", "task_index", "taskset_id", "index",
		"prompt_truncated", "response_truncated", "role", "content", "system", "user", "assistant", "tool"), tensorFields...) {
		m[s] = s
	}
	return m
}()

func intern(b []byte) string {
	if s, ok := interned[string(b)]; ok {
		return s
	}
	return string(b)
}

// markObj is the stack's MARK sentinel.
type markObj struct{}

// unpickle decodes a pickle of plain values (dict, list, tuple, str, int,
// float, bool, None). Any other opcode — a class reference, bytes, a set —
// is refused with its name.
func unpickle(b []byte) (any, error) {
	var (
		stack = make([]any, 0, 64)
		memo  = make([]any, 0, 64)
		pos   int
	)
	need := func(n int) ([]byte, error) {
		if n < 0 || pos+n > len(b) {
			return nil, fmt.Errorf("pickle truncated at byte %d", pos)
		}
		s := b[pos : pos+n]
		pos += n
		return s, nil
	}
	// uarg reads the opcode's n-byte little-endian unsigned argument.
	uarg := func(n int) (uint64, error) {
		s, err := need(n)
		if err != nil {
			return 0, err
		}
		var v uint64
		for i := n - 1; i >= 0; i-- {
			v = v<<8 | uint64(s[i])
		}
		return v, nil
	}
	// width is the size of an integer-argument opcode's argument: one byte
	// for the short forms, 2 for BININT2, 4 for the long forms and BININT,
	// 8 for BINUNICODE8.
	width := func(op byte) int {
		switch op {
		case opBinInt2:
			return 2
		case opBinInt, opLong4, opBinUnicode, opLongBinPut, opLongBinGet:
			return 4
		case opBinUnicode8:
			return 8
		}
		return 1
	}
	pop := func() (any, error) {
		if len(stack) == 0 {
			return nil, fmt.Errorf("pickle stack underflow at byte %d", pos)
		}
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if _, ok := v.(markObj); ok {
			return nil, fmt.Errorf("pickle: unexpected MARK at byte %d", pos)
		}
		return v, nil
	}
	popMark := func() ([]any, error) {
		for i := len(stack) - 1; i >= 0; i-- {
			if _, ok := stack[i].(markObj); ok {
				items := make([]any, len(stack)-i-1)
				copy(items, stack[i+1:])
				stack = stack[:i]
				return items, nil
			}
		}
		return nil, fmt.Errorf("pickle: no MARK before byte %d", pos)
	}
	top := func() (any, error) {
		if len(stack) == 0 {
			return nil, fmt.Errorf("pickle stack underflow at byte %d", pos)
		}
		return stack[len(stack)-1], nil
	}
	getMemo := func(i uint64) error {
		if i >= uint64(len(memo)) || memo[i] == nil {
			return fmt.Errorf("pickle: memo %d not defined", i)
		}
		stack = append(stack, memo[i])
		return nil
	}
	putMemo := func(i uint64) error {
		v, err := top()
		if err != nil {
			return err
		}
		if i > uint64(len(b)) { // a memo index can never exceed the opcodes seen
			return fmt.Errorf("pickle: memo index %d out of range", i)
		}
		for uint64(len(memo)) <= i {
			memo = append(memo, nil)
		}
		memo[i] = v
		return nil
	}
	setItems := func(d any, kv []any) error {
		dict, ok := d.(*Dict)
		if !ok || len(kv)%2 != 0 {
			return fmt.Errorf("pickle: SETITEMS on %T", d)
		}
		dict.Keys = slices.Grow(dict.Keys, len(kv)/2)
		dict.Vals = slices.Grow(dict.Vals, len(kv)/2)
		for i := 0; i < len(kv); i += 2 {
			if err := dictSet(dict, kv[i], kv[i+1]); err != nil {
				return err
			}
		}
		return nil
	}
	appendItems := func(op string, items ...any) error {
		l, err := top()
		if err != nil {
			return err
		}
		list, ok := l.(*List)
		if !ok {
			return fmt.Errorf("pickle: %s to %T", op, l)
		}
		list.Items = append(list.Items, items...)
		return nil
	}
	for {
		if pos >= len(b) {
			return nil, errors.New("pickle ends without STOP")
		}
		op := b[pos]
		pos++
		switch op {
		case opProto:
			if _, err := need(1); err != nil {
				return nil, err
			}
		case opFrame:
			if _, err := need(8); err != nil {
				return nil, err
			}
		case opStop:
			v, err := pop()
			if err != nil {
				return nil, err
			}
			if len(stack) != 0 {
				return nil, errors.New("pickle: values left on the stack at STOP")
			}
			return v, nil
		case opNone:
			stack = append(stack, nil)
		case opNewTrue:
			stack = append(stack, true)
		case opNewFalse:
			stack = append(stack, false)
		case opBinInt1, opBinInt2, opBinInt:
			v, err := uarg(width(op))
			if err != nil {
				return nil, err
			}
			if op == opBinInt { // the only signed one
				stack = append(stack, int64(int32(v)))
			} else {
				stack = append(stack, int64(v))
			}
		case opLong1, opLong4:
			v, err := uarg(width(op))
			if err != nil {
				return nil, err
			}
			n := int(v)
			if op == opLong4 {
				n = int(int32(v)) // signed: a negative size is refused by need
			}
			s, err := need(n)
			if err != nil {
				return nil, err
			}
			stack = append(stack, decodeLong(s))
		case opBinFloat:
			s, err := need(8)
			if err != nil {
				return nil, err
			}
			stack = append(stack, math.Float64frombits(binary.BigEndian.Uint64(s)))
		case opShortBinUnicode, opBinUnicode, opBinUnicode8:
			n, err := uarg(width(op))
			if err != nil {
				return nil, err
			}
			if n > uint64(len(b)) {
				return nil, fmt.Errorf("pickle truncated at byte %d", pos)
			}
			s, err := need(int(n))
			if err != nil {
				return nil, err
			}
			stack = append(stack, intern(s))
		case opEmptyList:
			stack = append(stack, &List{})
		case opEmptyDict:
			stack = append(stack, &Dict{})
		case opEmptyTuple:
			stack = append(stack, Tuple{})
		case opMark:
			stack = append(stack, markObj{})
		case opAppend:
			v, err := pop()
			if err != nil {
				return nil, err
			}
			if err := appendItems("APPEND", v); err != nil {
				return nil, err
			}
		case opAppends:
			items, err := popMark()
			if err != nil {
				return nil, err
			}
			if err := appendItems("APPENDS", items...); err != nil {
				return nil, err
			}
		case opSetItem:
			v, err := pop()
			if err != nil {
				return nil, err
			}
			k, err := pop()
			if err != nil {
				return nil, err
			}
			d, err := top()
			if err != nil {
				return nil, err
			}
			if err := setItems(d, []any{k, v}); err != nil {
				return nil, err
			}
		case opSetItems:
			kv, err := popMark()
			if err != nil {
				return nil, err
			}
			d, err := top()
			if err != nil {
				return nil, err
			}
			if err := setItems(d, kv); err != nil {
				return nil, err
			}
		case opTuple:
			items, err := popMark()
			if err != nil {
				return nil, err
			}
			stack = append(stack, Tuple(items))
		case opTuple1, opTuple2, opTuple3:
			n := int(op-opTuple1) + 1
			if len(stack) < n {
				return nil, fmt.Errorf("pickle stack underflow at byte %d", pos)
			}
			t := make(Tuple, n)
			for i := n - 1; i >= 0; i-- {
				v, err := pop()
				if err != nil {
					return nil, err
				}
				t[i] = v
			}
			stack = append(stack, t)
		case opMemoize:
			if err := putMemo(uint64(len(memo))); err != nil {
				return nil, err
			}
		case opBinPut, opLongBinPut:
			i, err := uarg(width(op))
			if err != nil {
				return nil, err
			}
			if err := putMemo(i); err != nil {
				return nil, err
			}
		case opBinGet, opLongBinGet:
			i, err := uarg(width(op))
			if err != nil {
				return nil, err
			}
			if err := getMemo(i); err != nil {
				return nil, err
			}
		default:
			name, ok := opNames[op]
			if !ok {
				name = fmt.Sprintf("0x%02x", op)
			}
			return nil, &notPlainError{op: name, at: pos - 1, key: pendingKey(stack)}
		}
	}
}

// dictSet stores k: v; keys must be hashable plain values (str, int, float,
// bool, None, tuples of those).
func dictSet(d *Dict, k, v any) error {
	switch k.(type) {
	case *List, *Dict:
		return fmt.Errorf("pickle: unhashable dict key %T", k)
	}
	for i, key := range d.Keys {
		if equalKey(key, k) {
			d.Vals[i] = v
			return nil
		}
	}
	d.Keys = append(d.Keys, k)
	d.Vals = append(d.Vals, v)
	return nil
}

func equalKey(a, b any) bool {
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && x == y
	case int64:
		y, ok := b.(int64)
		return ok && x == y
	}
	return false
}

// decodeLong decodes a two's complement little-endian integer.
func decodeLong(s []byte) any {
	if len(s) == 0 {
		return int64(0)
	}
	if len(s) <= 8 {
		var u uint64
		for i := len(s) - 1; i >= 0; i-- {
			u = u<<8 | uint64(s[i])
		}
		shift := uint(64 - 8*len(s))
		return int64(u<<shift) >> shift
	}
	be := make([]byte, len(s))
	for i := range s {
		be[len(s)-1-i] = s[i]
	}
	n := new(big.Int).SetBytes(be)
	if s[len(s)-1]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(s))))
	}
	if n.IsInt64() {
		return n.Int64()
	}
	return n
}
