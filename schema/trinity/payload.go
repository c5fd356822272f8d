package trinity

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// The payload of an experience_bytes blob (Trinity-RFT 0.5.2 and later):
//
//	offset 0      4 bytes  magic "TRXP"
//	offset 4      1 byte   version, 1
//	offset 5      8 bytes  M, u64 LE: length of the metadata
//	offset 13     8 bytes  T, u64 LE: length of the tensor block
//	offset 21     M bytes  metadata: a pickle of plain values
//	offset 21+M   T bytes  tensor block: safetensors
//
// The metadata is {"version": 1, "num_items": n, "items": [item, ...]}, each
// item a dict of the 14 itemKeys; the tensors of item i are named
// "{i}:{field}". An SQL row holds exactly one item.

const (
	magic      = "TRXP"
	version    = 1
	headerSize = 21
)

// ColumnPayload is the table column that holds the payload.
const ColumnPayload = "experience_bytes"

// itemKeys are the keys of a payload item, in the order upstream writes them.
var itemKeyOrder = []string{
	"eid", "reward", "truncate_status", "info", "metrics", "prompt_length",
	"response_text", "prompt_text", "messages", "tools", "chosen_messages",
	"rejected_messages", "custom_fields", "multi_modal_input_keys",
}

var itemKeys = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range itemKeyOrder {
		m[k] = true
	}
	return m
}()

// tensorFields are the item's tensor fields (absent when None).
var tensorFields = []string{
	"tokens", "logprobs", "token_level_reward", "advantages", "returns",
	"action_mask", "chosen", "rejected", "teacher_logprobs", "routed_experts",
}

// fieldError is a payload problem in one field of the item (or in the
// container, field experience_bytes).
type fieldError struct {
	field string
	msg   string
}

func (e *fieldError) Error() string { return e.msg }

func containerErr(format string, args ...any) *fieldError {
	return &fieldError{field: ColumnPayload, msg: fmt.Sprintf(format, args...)}
}

// payload is one decoded experience: the item's metadata and its tensors by
// field name.
type payload struct {
	item    *Dict
	tensors map[string]Tensor
}

// decodePayload decodes a single-experience blob.
func decodePayload(blob []byte) (payload, *fieldError) {
	var p payload
	if blob == nil {
		return p, containerErr("NULL payload")
	}
	if len(blob) < 4 || string(blob[:4]) != magic {
		if len(blob) >= 2 && blob[0] == opProto {
			return p, containerErr("legacy pickle payload, written by Trinity 0.5.1 or earlier (it needs Python, torch and Trinity's classes to read; re-export it with Trinity 0.5.2 or later)")
		}
		return p, containerErr("magic %q, want %q", clip(blob, 4), magic)
	}
	if len(blob) < headerSize {
		return p, containerErr("payload of %d bytes: shorter than its %d-byte header", len(blob), headerSize)
	}
	if v := blob[4]; v != version {
		return p, containerErr("unknown payload version %d (this reader knows version %d)", v, version)
	}
	m := binary.LittleEndian.Uint64(blob[5:])
	t := binary.LittleEndian.Uint64(blob[13:])
	rest := uint64(len(blob) - headerSize)
	if m > rest {
		return p, containerErr("metadata length %d runs past the end of the %d-byte payload", m, len(blob))
	}
	if t > rest-m {
		return p, containerErr("tensor block truncated: %d bytes declared, %d present", t, rest-m)
	}
	meta, err := unpickle(blob[headerSize : headerSize+m])
	if err != nil {
		var ve *valueError
		if errors.As(err, &ve) && ve.key != "" {
			return p, &fieldError{field: ve.key, msg: "metadata: " + err.Error()}
		}
		return p, &fieldError{field: ColumnPayload, msg: "metadata: " + err.Error()}
	}
	top, ok := meta.(*Dict)
	if !ok {
		return p, containerErr("metadata is %s, want a dict", pyType(meta))
	}
	itemsV, _ := top.Get("items")
	items, ok := itemsV.(*List)
	if !ok {
		return p, containerErr("metadata has no list of items")
	}
	if n, _ := top.Get("num_items"); len(items.Items) != 1 || (n != nil && n != int64(1)) {
		return p, containerErr("payload holds %d experiences; an SQL row holds one", len(items.Items))
	}
	p.item, ok = items.Items[0].(*Dict)
	if !ok {
		return p, containerErr("item is %s, want a dict", pyType(items.Items[0]))
	}
	for _, k := range p.item.Keys {
		if s, ok := k.(string); !ok || !itemKeys[s] {
			return p, &fieldError{field: fmt.Sprint(k), msg: "unknown item key"}
		}
	}
	tensors, err := readSafetensors(blob[headerSize+m : headerSize+m+t])
	if err != nil {
		return p, containerErr("tensor block: %v", err)
	}
	p.tensors = make(map[string]Tensor, len(tensors))
	for name, ts := range tensors {
		field, ok := strings.CutPrefix(name, "0:")
		if !ok {
			continue // upstream reads only the names it knows
		}
		p.tensors[field] = ts
	}
	if v, _ := p.item.Get("multi_modal_input_keys"); v != nil {
		if l, ok := v.(*List); !ok || len(l.Items) > 0 {
			return p, &fieldError{field: "multi_modal_inputs", msg: "multi-modal input tensors: the experience store has no column for them"}
		}
	}
	return p, nil
}

// encodePayload writes a single-experience blob: the item as a protocol-2
// pickle, the tensors named "0:{field}" in the reference safetensors layout.
func encodePayload(dst []byte, item *Dict, tensors []namedTensor) ([]byte, error) {
	top := &Dict{
		Keys: []any{"version", "num_items", "items"},
		Vals: []any{int64(1), int64(1), &List{Items: []any{item}}},
	}
	var pk pickler
	if err := pk.dump(top); err != nil {
		return nil, err
	}
	for i := range tensors {
		tensors[i].name = "0:" + tensors[i].name
	}
	start := len(dst)
	dst = append(dst, magic...)
	dst = append(dst, version)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(len(pk.b)))
	dst = binary.LittleEndian.AppendUint64(dst, 0) // T, filled below
	dst = append(dst, pk.b...)
	blockStart := len(dst)
	dst, err := appendSafetensors(dst, tensors)
	if err != nil {
		return nil, err
	}
	binary.LittleEndian.PutUint64(dst[start+13:], uint64(len(dst)-blockStart))
	return dst, nil
}

func clip(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return bytes.Clone(b)
}

// pyType names a decoded value's Python type for messages.
func pyType(v any) string {
	switch v.(type) {
	case nil:
		return "None"
	case bool:
		return "bool"
	case int64:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case *List:
		return "list"
	case *Dict:
		return "dict"
	case Tuple:
		return "tuple"
	}
	if _, ok := v.(interface{ BitLen() int }); ok {
		return "int"
	}
	return fmt.Sprintf("%T", v)
}
