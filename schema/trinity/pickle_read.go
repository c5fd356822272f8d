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

// valueError is a problem in a decoded pickle, with the item key (an entry
// of itemKeys) whose value holds it when it can be told.
type valueError struct {
	key string
	msg string
}

func (e *valueError) Error() string { return e.msg }

// pendingKey returns the item key whose value was being built when decoding
// stopped: dict entries lie on the stack as key, value pairs after the MARK
// that follows their dict, and the pending entry is the last pair of the
// outermost dict that has item keys (the item; a dict inside its info may
// have keys of the same names).
func pendingKey(stack []any) string {
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
		key := ""
		for p := i + 1; p < end; p += 2 {
			if s, ok := stack[p].(string); ok && itemKeys[s] {
				key = s
			}
		}
		if key != "" {
			return key
		}
	}
	return ""
}

// Bounds on a pickle's value, so that a hostile payload is refused in time
// and memory linear in its length. Decoding itself is linear: a dict is
// built through its index (Dict.find), memo entries are numbered in the
// order Python's pickler numbers them (each new one at the next index), an
// int is at most maxIntBytes long. The decoded value is then checked
// (bounded) before anything walks it: it nests at most maxDepth lists,
// dicts and tuples deep, no list or dict holds itself, and its expanded
// size — a value reached through n memo references counted n times, as its
// JSON text spells it out n times; each value 1, each str its UTF-8
// length — is at most maxExpansion × the pickle's length + expansionSlack.
const (
	maxDepth       = 512
	maxExpansion   = 16
	expansionSlack = 1 << 20
	// maxIntBytes is the longest int, in bytes, that stays within the
	// maxIntDigits decimal digits Python's str() converts
	// (sys.int_info.default_max_str_digits).
	maxIntBytes  = 1785
	maxIntDigits = 4300
)

// bounded checks a decoded value against the bounds above, with a budget of
// expanded size, and that every str is text (validText).
func bounded(v any, budget int64) error {
	w := walker{budget: budget, open: map[any]bool{}}
	return w.walk(v, 0, "")
}

type walker struct {
	budget int64
	open   map[any]bool // the lists and dicts being walked
}

// walk checks v, found depth containers deep under item key field.
func (w *walker) walk(v any, depth int, field string) error {
	w.budget--
	if w.budget < 0 {
		return &valueError{key: field, msg: fmt.Sprintf("expands (memo references) to more than %d× the pickle's size + %d MiB", maxExpansion, expansionSlack>>20)}
	}
	var items []any
	switch x := v.(type) {
	case string:
		w.budget -= int64(len(x))
		if err := validText(x); err != nil {
			return &valueError{key: field, msg: "a str " + err.Error()}
		}
		return nil
	case *List:
		items = x.Items
	case Tuple:
		items = x
	case *Dict:
		items = x.Keys
	default:
		return nil
	}
	if depth == maxDepth {
		return &valueError{key: field, msg: fmt.Sprintf("nests lists, dicts and tuples more than %d deep", maxDepth)}
	}
	if _, ok := v.(Tuple); !ok {
		if w.open[v] {
			return &valueError{key: field, msg: fmt.Sprintf("a %s that contains itself (a memo reference to it inside it)", pyType(v))}
		}
		w.open[v] = true
		defer delete(w.open, v)
	}
	for _, it := range items {
		if err := w.walk(it, depth+1, field); err != nil {
			return err
		}
	}
	if d, ok := v.(*Dict); ok {
		for i, val := range d.Vals {
			f := field
			if k, ok := d.Keys[i].(string); ok && f == "" && itemKeys[k] {
				f = k
			}
			if err := w.walk(val, depth+1, f); err != nil {
				return err
			}
		}
	}
	return nil
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
// float, bool, None) within the bounds above. Any other opcode — a class
// reference, bytes, a set — is refused with its name.
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
		switch {
		case i == uint64(len(memo)):
			memo = append(memo, v)
		case i < uint64(len(memo)):
			memo[i] = v
		default:
			return fmt.Errorf("pickle: memo index %d out of order (the next is %d)", i, len(memo))
		}
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
			switch kv[i].(type) {
			case *List, *Dict:
				return fmt.Errorf("pickle: unhashable dict key %s", pyType(kv[i]))
			}
			dict.Set(kv[i], kv[i+1])
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
			if err := bounded(v, maxExpansion*int64(len(b))+expansionSlack); err != nil {
				return nil, err
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
			if n > maxIntBytes {
				return nil, &valueError{key: pendingKey(stack), msg: fmt.Sprintf("an int of %d bytes at byte %d, beyond the %d digits Python's str() converts", n, pos, maxIntDigits)}
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
			return nil, &valueError{key: pendingKey(stack), msg: fmt.Sprintf("a value outside plain Python values: pickle opcode %s at byte %d (a class reference or an object other than dict, list, tuple, str, int, float, bool and None)", name, pos-1)}
		}
	}
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
