package trinity

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"

	"github.com/rftpipe/rftpipe/schema"
)

// record is one experience between a table row and a store row: the values
// of the store's columns, resolved as upstream's reader resolves them.
type record struct {
	batch, task, suffix any // int64, string or nil
	run, step           any // int64 or nil
	reward              any // float64 or nil
	promptLength        int64
	truncateStatus      any // string or nil
	modelVersion        any // int64 or nil
	info, metrics       *Dict
	promptText          any // string or nil
	responseText        any
	// JSON-valued item fields: nil (None) or a plain value (usually a list).
	messages, tools, chosenMessages, rejectedMessages any
	customFields                                      *List

	ints   [nIntField]vec[int32]
	floats [nFloatField]vec[float32]
	mask   vec[bool]
	routed routed
}

// routed is the routed_experts tensor, [tokens-1, layers, top_k] in C
// order; ok is false when it is absent.
type routed struct {
	v     []int16
	shape [3]int
	ok    bool
}

// vec is a tensor as a store list; ok is false when it is absent (null).
type vec[T any] struct {
	v  []T
	ok bool
}

func (v *vec[T]) set(x []T) { v.v, v.ok = x, true }

// Integer tensor fields (list<int32> columns) and float tensor fields
// (list<float32> columns), in index order.
const (
	fTokens = iota
	fChosen
	fRejected
	nIntField
)

const (
	fLogprobs = iota
	fTokenLevelReward
	fAdvantages
	fReturns
	fTeacherLogprobs
	nFloatField
)

var intFieldNames = [nIntField]string{"tokens", "chosen", "rejected"}
var floatFieldNames = [nFloatField]string{"logprobs", "token_level_reward", "advantages", "returns", "teacher_logprobs"}

func (r *record) reset() {
	ints, floats, mask, rv := r.ints, r.floats, r.mask, r.routed.v
	*r = record{}
	r.routed.v = rv[:0]
	for i := range ints {
		r.ints[i].v = ints[i].v[:0]
	}
	for i := range floats {
		r.floats[i].v = floats[i].v[:0]
	}
	r.mask.v = mask.v[:0]
}

// tableCols are the columns of a table row besides the payload (experience
// tables only; nil when NULL or when the table has none).
type tableCols struct {
	taskID, msgID       *string
	runID, modelVersion *int64
	reward              *float64
}

func ferr(field, format string, args ...any) *fieldError {
	return &fieldError{field: field, msg: fmt.Sprintf(format, args...)}
}

// fromPayload fills r from a decoded payload, then applies the table's
// column overrides when cols is not nil (experience tables): task, run,
// suffix, reward and model_version come from the columns, and
// info["model_version"] is set to the column's value.
func (r *record) fromPayload(p payload, cols *tableCols) *fieldError {
	r.reset()
	if e := r.fromEID(p.item); e != nil {
		return e
	}
	if e := r.fromFields(p.item); e != nil {
		return e
	}
	if e := r.fromTensors(p.tensors); e != nil {
		return e
	}
	if e := r.construct(); e != nil {
		return e
	}
	if m, ok := r.info.getInt("model_version"); ok {
		r.modelVersion = m
	}
	if cols != nil {
		return r.fromColumns(cols)
	}
	return nil
}

// fromEID sets the record's EID from the item's eid dict, checking each
// key's type, with the defaults of the keys it lacks.
func (r *record) fromEID(it *Dict) *fieldError {
	if v, ok := it.Get("eid"); ok && v != nil {
		eid, ok := v.(*Dict)
		if !ok {
			return ferr("eid", "is %s, want a dict", pyType(v))
		}
		for i, k := range eid.Keys {
			val := eid.Vals[i]
			switch k {
			case "batch", "task", "suffix":
				if !isID(val) {
					return ferr(k.(string), "is %s, want int or str", pyType(val))
				}
			case "run", "step":
				if _, ok := val.(int64); !ok && val != nil {
					return ferr(k.(string), "is %s, want int", pyType(val))
				}
			default:
				return ferr("eid", "unknown key %v", k)
			}
			switch k {
			case "batch":
				r.batch = val
			case "task":
				r.task = val
			case "suffix":
				r.suffix = val
			case "run":
				r.run = val
			case "step":
				r.step = val
			}
		}
	}
	// EID defaults for keys the dict lacks (upstream draws a random suffix;
	// the store leaves it null).
	if _, ok := dictGet(it, "eid", "batch"); !ok {
		r.batch = ""
	}
	if _, ok := dictGet(it, "eid", "task"); !ok {
		r.task = ""
	}
	if _, ok := dictGet(it, "eid", "run"); !ok {
		r.run = int64(0)
	}
	if _, ok := dictGet(it, "eid", "step"); !ok {
		r.step = int64(0)
	}
	return nil
}

// fromFields sets the item's scalar, text and dict fields, checking their
// types.
func (r *record) fromFields(it *Dict) *fieldError {
	switch v, _ := it.Get("reward"); x := v.(type) {
	case nil:
	case float64:
		r.reward = x
	case int64:
		r.reward = float64(x)
	default:
		return ferr("reward", "is %s, want a number", pyType(v))
	}
	switch v, _ := it.Get("truncate_status"); v.(type) {
	case nil, string:
		r.truncateStatus = v
	default:
		return ferr("truncate_status", "is %s, want str", pyType(v))
	}
	r.promptLength = 1
	if v, ok := it.Get("prompt_length"); ok {
		n, ok := v.(int64)
		if !ok || n < math.MinInt32 || n > math.MaxInt32 {
			return ferr("prompt_length", "is %s %v, want an int32", pyType(v), v)
		}
		r.promptLength = n
	}
	for _, k := range []string{"info", "metrics"} {
		v, _ := it.Get(k)
		d, ok := v.(*Dict)
		if !ok && v != nil {
			return ferr(k, "is %s, want a dict", pyType(v))
		}
		if k == "info" {
			r.info = d
		} else {
			r.metrics = d
		}
	}
	for _, f := range []struct {
		key string
		dst *any
	}{{"prompt_text", &r.promptText}, {"response_text", &r.responseText}} {
		switch v, _ := it.Get(f.key); v.(type) {
		case nil, string:
			*f.dst = v
		default:
			return ferr(f.key, "is %s, want str", pyType(v))
		}
	}
	r.messages, _ = it.Get("messages")
	r.tools, _ = it.Get("tools")
	r.chosenMessages, _ = it.Get("chosen_messages")
	r.rejectedMessages, _ = it.Get("rejected_messages")
	if v, _ := it.Get("custom_fields"); v != nil {
		l, ok := v.(*List)
		if !ok {
			return ferr("custom_fields", "is %s, want a list", pyType(v))
		}
		for _, cf := range l.Items {
			d, ok := cf.(*Dict)
			if !ok {
				return ferr("custom_fields", "holds %s, want dicts", pyType(cf))
			}
			if dt, _ := d.Get("data_type"); !isTorchDtype(dt) {
				return ferr("custom_fields", "data_type %v does not name a torch dtype", dt)
			}
		}
		r.customFields = l
	}
	return nil
}

// fromTensors sets the token-level fields from the payload's tensors.
func (r *record) fromTensors(tensors map[string]Tensor) *fieldError {
	for i, name := range intFieldNames {
		if t, ok := tensors[name]; ok {
			v, e := intTensor(name, t, r.ints[i].v)
			if e != nil {
				return e
			}
			r.ints[i].set(v)
		}
	}
	for i, name := range floatFieldNames {
		if t, ok := tensors[name]; ok {
			v, e := floatTensor(name, t, r.floats[i].v)
			if e != nil {
				return e
			}
			r.floats[i].set(v)
		}
	}
	if t, ok := tensors["action_mask"]; ok {
		v, e := maskTensor(t, r.mask.v)
		if e != nil {
			return e
		}
		r.mask.set(v)
	}
	if t, ok := tensors[schema.RoutedExperts]; ok {
		if e := r.routed.fromTensor(t, r.ints[fTokens]); e != nil {
			return e
		}
	}
	return nil
}

// fromColumns applies an experience table's columns: task, run, suffix,
// reward and model_version come from them, and info["model_version"] is
// set to the column's value.
func (r *record) fromColumns(cols *tableCols) *fieldError {
	for _, c := range []struct {
		name string
		v    *string
	}{{"task_id", cols.taskID}, {"msg_id", cols.msgID}} {
		if c.v == nil {
			continue
		}
		if err := validText(*c.v); err != nil {
			return ferr(c.name, "text %v", err)
		}
	}
	r.task, r.run, r.suffix, r.reward, r.modelVersion = nil, nil, nil, nil, nil
	if cols.taskID != nil {
		r.task = *cols.taskID
	}
	if cols.runID != nil {
		r.run = *cols.runID
	}
	if cols.msgID != nil {
		r.suffix = *cols.msgID
	}
	if cols.reward != nil {
		r.reward = *cols.reward
	}
	if cols.modelVersion != nil {
		r.modelVersion = *cols.modelVersion
	}
	if r.info == nil {
		r.info = &Dict{}
	}
	r.info.Set("model_version", r.modelVersion)
	return nil
}

// construct applies what upstream's Experience constructor does to a
// decoded item: a single-turn row without a mask gets one (ones over the
// response, or zeros over the log-probs when prompt-truncated), after the
// constructor's assertions; a DPO row (chosen and rejected, no mask) has
// prompt_length set to len(tokens).
func (r *record) construct() *fieldError {
	if r.mask.ok {
		return nil
	}
	if r.ints[fChosen].ok && r.ints[fRejected].ok {
		r.promptLength = int64(len(r.ints[fTokens].v))
		return nil
	}
	if r.promptLength <= 0 {
		return ferr("prompt_length", "is %d: upstream's constructor asserts prompt_length > 0", r.promptLength)
	}
	if r.truncateStatus == "prompt_truncated" {
		r.mask.set(make([]bool, len(r.floats[fLogprobs].v)))
		return nil
	}
	n := int64(len(r.ints[fTokens].v))
	if n <= r.promptLength {
		return ferr("tokens", "%d tokens with prompt_length %d: upstream's constructor asserts a response", n, r.promptLength)
	}
	m := make([]bool, n-r.promptLength)
	for i := range m {
		m[i] = true
	}
	r.mask.set(m)
	return nil
}

func isID(v any) bool {
	switch v.(type) {
	case nil, int64, string:
		return true
	}
	return false
}

func isTorchDtype(v any) bool {
	s, ok := v.(string)
	return ok && len(s) > len("torch.") && s[:len("torch.")] == "torch."
}

// dictGet looks up d[k1][k2].
func dictGet(d *Dict, k1, k2 string) (any, bool) {
	v, ok := d.Get(k1)
	if !ok {
		return nil, false
	}
	inner, ok := v.(*Dict)
	if !ok {
		return nil, false
	}
	return inner.Get(k2)
}

func (d *Dict) getInt(k string) (int64, bool) {
	if d == nil {
		return 0, false
	}
	v, _ := d.Get(k)
	n, ok := v.(int64)
	return n, ok
}

// vectorLen returns the length of field name's tensor t, which must have
// one dimension.
func vectorLen(name string, t Tensor) (int, *fieldError) {
	if len(t.Shape) != 1 {
		return 0, ferr(name, "tensor of shape %v, want one dimension", t.Shape)
	}
	return int(t.Shape[0]), nil
}

// intTensor converts an integer tensor of one dimension to int32 values.
func intTensor(name string, t Tensor, dst []int32) ([]int32, *fieldError) {
	n, err := vectorLen(name, t)
	if err != nil {
		return nil, err
	}
	d := t.Data
	dst = dst[:0]
	switch t.Dtype {
	case "I32":
		for i := 0; i < n; i++ {
			dst = append(dst, int32(binary.LittleEndian.Uint32(d[4*i:])))
		}
		return dst, nil
	case "I64", "U64", "U32", "I16", "U16", "I8", "U8":
	default:
		return nil, ferr(name, "tensor of dtype %s, want integers", t.Dtype)
	}
	for i := 0; i < n; i++ {
		v, ok := intAt(t.Dtype, d, i)
		if !ok || v < math.MinInt32 || v > math.MaxInt32 {
			return nil, ferr(name, "value at %d does not fit int32", i)
		}
		dst = append(dst, int32(v))
	}
	return dst, nil
}

// fromTensor reads a routed_experts tensor: any integer dtype, three
// dimensions, one row per token but the last, values within int16.
func (ro *routed) fromTensor(t Tensor, tokens vec[int32]) *fieldError {
	name := schema.RoutedExperts
	if len(t.Shape) != 3 {
		return ferr(name, "tensor of shape %v, want [len(tokens)-1, layers, top_k]", t.Shape)
	}
	if !tokens.ok || t.Shape[0] != int64(len(tokens.v))-1 {
		return ferr(name, "tensor of shape %v for %d tokens, want %d rows (len(tokens)-1)", t.Shape, len(tokens.v), len(tokens.v)-1)
	}
	switch t.Dtype {
	case "U8", "I8", "I16", "U16", "I32", "U32", "I64", "U64":
	default:
		return ferr(name, "tensor of dtype %s, want integers", t.Dtype)
	}
	n := int(t.Shape[0] * t.Shape[1] * t.Shape[2])
	v := ro.v[:0]
	for i := 0; i < n; i++ {
		x, ok := intAt(t.Dtype, t.Data, i)
		if !ok || x < math.MinInt16 || x > math.MaxInt16 {
			return ferr(name, "expert id at %d does not fit int16", i)
		}
		v = append(v, int16(x))
	}
	ro.v, ro.ok = v, true
	ro.shape = [3]int{int(t.Shape[0]), int(t.Shape[1]), int(t.Shape[2])}
	return nil
}

// tensor encodes routed_experts in the narrowest dtype upstream uses that
// holds every id exactly: U8 when all lie in [0, 255], else I16.
func (ro *routed) tensor() Tensor {
	u8 := true
	for _, x := range ro.v {
		if x < 0 || x > 255 {
			u8 = false
			break
		}
	}
	shape := []int64{int64(ro.shape[0]), int64(ro.shape[1]), int64(ro.shape[2])}
	if u8 {
		b := make([]byte, len(ro.v))
		for i, x := range ro.v {
			b[i] = byte(x)
		}
		return Tensor{"U8", shape, b}
	}
	b := make([]byte, 2*len(ro.v))
	for i, x := range ro.v {
		binary.LittleEndian.PutUint16(b[2*i:], uint16(x))
	}
	return Tensor{"I16", shape, b}
}

// intAt reads element i of an integer dtype; ok is false past int64.
func intAt(dtype string, d []byte, i int) (int64, bool) {
	switch dtype {
	case "I64":
		return int64(binary.LittleEndian.Uint64(d[8*i:])), true
	case "U64":
		u := binary.LittleEndian.Uint64(d[8*i:])
		return int64(u), u <= math.MaxInt64
	case "I32":
		return int64(int32(binary.LittleEndian.Uint32(d[4*i:]))), true
	case "U32":
		return int64(binary.LittleEndian.Uint32(d[4*i:])), true
	case "I16":
		return int64(int16(binary.LittleEndian.Uint16(d[2*i:]))), true
	case "U16":
		return int64(binary.LittleEndian.Uint16(d[2*i:])), true
	case "I8":
		return int64(int8(d[i])), true
	case "U8", "BOOL":
		return int64(d[i]), true
	}
	return 0, false
}

// floatTensor converts a float tensor of one dimension to float32 values,
// refusing a float64 value float32 cannot hold exactly.
func floatTensor(name string, t Tensor, dst []float32) ([]float32, *fieldError) {
	n, err := vectorLen(name, t)
	if err != nil {
		return nil, err
	}
	d := t.Data
	dst = dst[:0]
	switch t.Dtype {
	case "F32":
		for i := 0; i < n; i++ {
			dst = append(dst, math.Float32frombits(binary.LittleEndian.Uint32(d[4*i:])))
		}
	case "F64":
		for i := 0; i < n; i++ {
			v := math.Float64frombits(binary.LittleEndian.Uint64(d[8*i:]))
			f := float32(v)
			if float64(f) != v && !math.IsNaN(v) {
				return nil, ferr(name, "float64 value %v at %d is not exact in float32", v, i)
			}
			dst = append(dst, f)
		}
	case "BF16":
		for i := 0; i < n; i++ {
			dst = append(dst, math.Float32frombits(uint32(binary.LittleEndian.Uint16(d[2*i:]))<<16))
		}
	case "F16":
		for i := 0; i < n; i++ {
			dst = append(dst, half(binary.LittleEndian.Uint16(d[2*i:])))
		}
	default:
		return nil, ferr(name, "tensor of dtype %s, want floats", t.Dtype)
	}
	return dst, nil
}

// half converts an IEEE-754 binary16 value to float32 (exact).
func half(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := int(h>>10) & 0x1f
	frac := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | frac<<13)
	case exp == 0 && frac == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal
		f := float32(frac) / (1 << 24)
		if sign != 0 {
			f = -f
		}
		return f
	}
	return math.Float32frombits(sign | uint32(exp-15+127)<<23 | frac<<13)
}

// maskTensor converts a 0/1 tensor of any integer or bool dtype to bools.
func maskTensor(t Tensor, dst []bool) ([]bool, *fieldError) {
	n, err := vectorLen("action_mask", t)
	if err != nil {
		return nil, err
	}
	dst = dst[:0]
	if t.Dtype == "BOOL" || t.Dtype == "U8" {
		for _, b := range t.Data[:n] {
			if b > 1 {
				return nil, ferr("action_mask", "value %d, want 0 or 1", b)
			}
			dst = append(dst, b == 1)
		}
		return dst, nil
	}
	for i := 0; i < n; i++ {
		v, ok := intAt(t.Dtype, t.Data, i)
		if !ok || v < 0 || v > 1 {
			if _, known := dtypeSize[t.Dtype]; !known || t.Dtype[0] == 'F' || t.Dtype[0] == 'B' || t.Dtype[0] == 'C' {
				return nil, ferr("action_mask", "tensor of dtype %s, want bool or 0/1 integers", t.Dtype)
			}
			return nil, ferr("action_mask", "value %d at %d, want 0 or 1", v, i)
		}
		dst = append(dst, v == 1)
	}
	return dst, nil
}

// idText renders an id as Python's str() does (task_id, msg_id columns).
func idText(v any) *string {
	switch x := v.(type) {
	case string:
		return &x
	case int64:
		s := strconv.FormatInt(x, 10)
		return &s
	}
	return nil
}
