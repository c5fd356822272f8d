package trinity

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"

	"github.com/rftpipe/rftpipe/schema"
)

// batchCols holds the columns of one store record batch that a buffer row
// carries (nil when the store lacks one). Other columns (duplicate_of, the
// trainer-side lists, unknown extras) have no place in a buffer row.
type batchCols struct {
	batch, task, run, step, suffix, reward, promptLength arrow.Array
	truncateStatus, modelVersion, info, metrics          arrow.Array
	promptText, responseText                             arrow.Array
	messages, tools, chosenMessages, rejectedMessages    arrow.Array
	customFields                                         arrow.Array
	ints                                                 [nIntField]arrow.Array
	floats                                               [nFloatField]arrow.Array
	mask, routed                                         arrow.Array
}

func newBatchCols(rec arrow.Record) *batchCols {
	s := rec.Schema()
	col := func(name string) arrow.Array {
		if idx := s.FieldIndices(name); len(idx) > 0 {
			return rec.Column(idx[0])
		}
		return nil
	}
	c := &batchCols{
		batch: col(schema.Batch), task: col(schema.Task), run: col(schema.Run), step: col(schema.Step),
		suffix: col(schema.Suffix), reward: col(schema.Reward), promptLength: col(schema.PromptLength),
		truncateStatus: col(schema.TruncateStatus), modelVersion: col(schema.ModelVersion),
		info: col(schema.Info), metrics: col(schema.Metrics),
		promptText: col(ColPromptText), responseText: col(ColResponseText),
		messages: col(ColMessages), tools: col(ColTools), chosenMessages: col(ColChosenMessages),
		rejectedMessages: col(ColRejectedMessages), customFields: col(ColCustomFields),
		mask: col(schema.ActionMask), routed: col(schema.RoutedExperts),
	}
	for i, n := range intFieldNames {
		c.ints[i] = col(n)
	}
	for i, n := range floatFieldNames {
		c.floats[i] = col(n)
	}
	return c
}

// scalar returns element i of a scalar column as int64, float64, string,
// bool or nil.
func scalar(a arrow.Array, i int) any {
	if a == nil || a.IsNull(i) {
		return nil
	}
	switch c := a.(type) {
	case *array.Int64:
		return c.Value(i)
	case *array.Int32:
		return int64(c.Value(i))
	case *array.Int16:
		return int64(c.Value(i))
	case *array.Int8:
		return int64(c.Value(i))
	case *array.Uint32:
		return int64(c.Value(i))
	case *array.Uint16:
		return int64(c.Value(i))
	case *array.Uint8:
		return int64(c.Value(i))
	case *array.Uint64:
		if v := c.Value(i); v <= math.MaxInt64 {
			return int64(v)
		}
		return c.ValueStr(i)
	case *array.Float64:
		return c.Value(i)
	case *array.Float32:
		return float64(c.Value(i))
	case *array.String:
		return c.Value(i)
	case *array.LargeString:
		return c.Value(i)
	case *array.Boolean:
		return c.Value(i)
	}
	return a.ValueStr(i)
}

// jsonValue parses element i of a JSON-text column (null: nil).
func jsonValue(a arrow.Array, i int, name string) (any, *fieldError) {
	s, ok := scalar(a, i).(string)
	if !ok {
		return nil, nil
	}
	if err := validText(s); err != nil {
		return nil, ferr(name, "JSON text %v", err)
	}
	v, err := parseJSON(s)
	if err != nil {
		return nil, ferr(name, "not JSON text: %v", err)
	}
	return v, nil
}

// fromStore fills r from row i of a store batch.
func (r *record) fromStore(c *batchCols, i int) *fieldError {
	r.reset()
	if e := r.idsFromStore(c, i); e != nil {
		return e
	}
	if e := r.scalarsFromStore(c, i); e != nil {
		return e
	}
	if e := r.jsonFromStore(c, i); e != nil {
		return e
	}
	for k, a := range c.ints {
		r.ints[k] = listAt[int32](a, i, r.ints[k].v)
	}
	for k, a := range c.floats {
		r.floats[k] = listAt[float32](a, i, r.floats[k].v)
	}
	r.mask = listAt[bool](c.mask, i, r.mask.v)
	return r.routed.fromStore(c.routed, i)
}

// idsFromStore sets r's EID from row i, with the defaults of the columns
// the store lacks, checking the ids' types.
func (r *record) idsFromStore(c *batchCols, i int) *fieldError {
	r.batch, r.task, r.suffix = scalar(c.batch, i), scalar(c.task, i), scalar(c.suffix, i)
	r.run, r.step = scalar(c.run, i), scalar(c.step, i)
	if c.batch == nil {
		r.batch = ""
	}
	if c.task == nil {
		r.task = ""
	}
	if c.run == nil {
		r.run = int64(0)
	}
	if c.step == nil {
		r.step = int64(0)
	}
	for _, v := range []struct {
		name string
		v    any
	}{{schema.Batch, r.batch}, {schema.Task, r.task}, {schema.Suffix, r.suffix}} {
		if !isID(v.v) {
			return ferr(v.name, "id of type %T", v.v)
		}
	}
	return nil
}

// scalarsFromStore sets r's reward, prompt length, truncate status, model
// version and texts from row i, checking that every text (the ids' too) is
// valid.
func (r *record) scalarsFromStore(c *batchCols, i int) *fieldError {
	r.reward = scalar(c.reward, i)
	pl, ok := scalar(c.promptLength, i).(int64)
	if !ok {
		return ferr(schema.PromptLength, "null or missing: a buffer row needs it")
	}
	r.promptLength = pl
	r.truncateStatus = scalar(c.truncateStatus, i)
	r.modelVersion = scalar(c.modelVersion, i)
	r.promptText, r.responseText = scalar(c.promptText, i), scalar(c.responseText, i)
	for _, f := range []struct {
		name string
		v    any
	}{
		{schema.Batch, r.batch}, {schema.Task, r.task}, {schema.Suffix, r.suffix},
		{schema.TruncateStatus, r.truncateStatus}, {ColPromptText, r.promptText}, {ColResponseText, r.responseText},
	} {
		if s, ok := f.v.(string); ok {
			if err := validText(s); err != nil {
				return ferr(f.name, "text %v", err)
			}
		}
	}
	return nil
}

// jsonFromStore sets r's JSON fields from row i's JSON text columns,
// checking the types of info, metrics and custom_fields.
func (r *record) jsonFromStore(c *batchCols, i int) *fieldError {
	for _, f := range []struct {
		a    arrow.Array
		name string
		dst  *any
	}{
		{c.messages, ColMessages, &r.messages}, {c.tools, ColTools, &r.tools},
		{c.chosenMessages, ColChosenMessages, &r.chosenMessages},
		{c.rejectedMessages, ColRejectedMessages, &r.rejectedMessages},
	} {
		v, e := jsonValue(f.a, i, f.name)
		if e != nil {
			return e
		}
		*f.dst = v
	}
	for _, f := range []struct {
		a    arrow.Array
		name string
		dst  **Dict
	}{{c.info, schema.Info, &r.info}, {c.metrics, schema.Metrics, &r.metrics}} {
		v, e := jsonValue(f.a, i, f.name)
		if e != nil {
			return e
		}
		d, ok := v.(*Dict)
		if !ok && v != nil {
			return ferr(f.name, "JSON %s, want an object", pyType(v))
		}
		*f.dst = d
	}
	v, e := jsonValue(c.customFields, i, ColCustomFields)
	if e != nil {
		return e
	}
	if v != nil {
		l, ok := v.(*List)
		if !ok {
			return ferr(ColCustomFields, "JSON %s, want an array", pyType(v))
		}
		r.customFields = l
	}
	return nil
}

// fromStore reads row i of a routed_experts column (a list of lists of
// integer lists, canonically int16): every token has the same number of
// layers, every layer the same number of ids.
func (ro *routed) fromStore(a arrow.Array, i int) *fieldError {
	ro.v, ro.ok, ro.shape = ro.v[:0], false, [3]int{}
	if a == nil || a.IsNull(i) {
		return nil
	}
	name := schema.RoutedExperts
	tl := a.(array.ListLike)
	lo, hi := tl.ValueOffsets(i)
	ll, ok := tl.ListValues().(array.ListLike)
	if !ok {
		return ferr(name, "type %s, want a list of lists of integer lists", a.DataType())
	}
	kl, ok := ll.ListValues().(array.ListLike)
	if !ok {
		return ferr(name, "type %s, want a list of lists of integer lists", a.DataType())
	}
	ids, ok := kl.ListValues().(*array.Int16)
	if !ok {
		return ferr(name, "type %s, want int16 ids", a.DataType())
	}
	ro.shape[0], ro.shape[1], ro.shape[2] = int(hi-lo), -1, -1
	for t := lo; t < hi; t++ {
		if ll.IsNull(int(t)) {
			return ferr(name, "token %d: null", t-lo)
		}
		llo, lhi := ll.ValueOffsets(int(t))
		if ro.shape[1] >= 0 && int(lhi-llo) != ro.shape[1] {
			return ferr(name, "token %d has %d layers, token 0 has %d: not a [tokens-1, layers, top_k] tensor", t-lo, lhi-llo, ro.shape[1])
		}
		ro.shape[1] = int(lhi - llo)
		for l := llo; l < lhi; l++ {
			if kl.IsNull(int(l)) {
				return ferr(name, "token %d: null layer", t-lo)
			}
			klo, khi := kl.ValueOffsets(int(l))
			if ro.shape[2] >= 0 && int(khi-klo) != ro.shape[2] {
				return ferr(name, "token %d has %d experts in a layer, others %d: not a [tokens-1, layers, top_k] tensor", t-lo, khi-klo, ro.shape[2])
			}
			ro.shape[2] = int(khi - klo)
			for k := klo; k < khi; k++ {
				if ids.IsNull(int(k)) {
					return ferr(name, "token %d: null expert id", t-lo)
				}
			}
			ro.v = append(ro.v, ids.Int16Values()[klo:khi]...)
		}
	}
	ro.shape[1], ro.shape[2] = max(ro.shape[1], 0), max(ro.shape[2], 0)
	ro.ok = true
	return nil
}

// listAt returns row i of a list column (list or large list of T).
func listAt[T int32 | float32 | bool](a arrow.Array, i int, dst []T) vec[T] {
	if a == nil || a.IsNull(i) {
		return vec[T]{v: dst[:0]}
	}
	l := a.(array.ListLike)
	lo, hi := l.ValueOffsets(i)
	dst = dst[:0]
	switch vals := l.ListValues().(type) {
	case *array.Int32:
		dst = append(dst, any(vals.Int32Values()[lo:hi]).([]T)...)
	case *array.Float32:
		dst = append(dst, any(vals.Float32Values()[lo:hi]).([]T)...)
	case *array.Boolean:
		for k := lo; k < hi; k++ {
			dst = append(dst, any(vals.Value(int(k))).(T))
		}
	}
	return vec[T]{v: dst, ok: true}
}

// tableRow is what one buffer row holds.
type tableRow struct {
	cols     tableCols
	blob     []byte
	messages [3]*string // message_list (sft), chosen_message_list, rejected_message_list (dpo): json.dumps text
}

// toRow encodes r as a row of a table of kind k, with upstream's writer's
// columns (from_experience) and a payload its reader accepts: an
// action_mask on every non-DPO row, none on DPO rows, info["model_version"]
// equal to the model_version column in experience tables.
func (r *record) toRow(k Kind, dst []byte) (tableRow, *fieldError) {
	var row tableRow
	if e := r.checkRow(k); e != nil {
		return row, e
	}
	if k == KindExperience {
		row.cols = r.experienceCols()
	}
	blob, err := encodePayload(dst, r.item(k), r.tensors())
	if err != nil {
		return row, ferr(ColumnPayload, "%v", err)
	}
	row.blob = blob
	var e *fieldError
	switch k {
	case KindSFT:
		row.messages[0], e = pyJSON(ColMessages, r.messages)
	case KindDPO:
		if row.messages[1], e = pyJSON(ColChosenMessages, r.chosenMessages); e == nil {
			row.messages[2], e = pyJSON(ColRejectedMessages, r.rejectedMessages)
		}
	}
	return row, e
}

// checkRow checks r can be a row of a table of kind k, and gives a non-DPO
// row its action mask (construct).
func (r *record) checkRow(k Kind) *fieldError {
	dpo := r.ints[fChosen].ok && r.ints[fRejected].ok
	if k == KindDPO && !dpo {
		return ferr(schema.Chosen, "a dpo table row needs chosen and rejected")
	}
	if e := k.check(r); e != nil {
		return e
	}
	if !r.ints[fTokens].ok {
		return ferr(schema.Tokens, "null: a buffer row needs tokens")
	}
	if r.routed.ok && r.routed.shape[0] != len(r.ints[fTokens].v)-1 {
		return ferr(schema.RoutedExperts, "%d rows for %d tokens, want len(tokens)-1", r.routed.shape[0], len(r.ints[fTokens].v))
	}
	if dpo {
		if r.mask.ok {
			return ferr(schema.ActionMask, "set on a DPO row: upstream's DPO rows have none")
		}
		return nil
	}
	return r.construct()
}

// experienceCols returns the columns an experience table holds beside the
// payload.
func (r *record) experienceCols() tableCols {
	var c tableCols
	mv, _ := r.modelVersion.(int64)
	c.modelVersion = ptr(r.modelVersion != nil, mv)
	c.taskID, c.msgID = idText(r.task), idText(r.suffix)
	run, _ := r.run.(int64)
	c.runID = ptr(r.run != nil, run)
	rw, _ := r.reward.(float64)
	c.reward = ptr(r.reward != nil, rw)
	return c
}

// item returns the payload's item dict for a table of kind k, its keys in
// upstream's order.
func (r *record) item(k Kind) *Dict {
	// info["model_version"]: upstream's experience writer needs it, and it
	// is where dpo and sft rows keep the model version.
	info := r.info
	if k == KindExperience || r.modelVersion != nil {
		info = &Dict{}
		if r.info != nil {
			info.Keys = append(info.Keys, r.info.Keys...)
			info.Vals = append(info.Vals, r.info.Vals...)
		}
		info.Set("model_version", r.modelVersion)
	}
	item := &Dict{Keys: make([]any, 0, len(itemKeyOrder)), Vals: make([]any, 0, len(itemKeyOrder))}
	add := func(k string, v any) {
		item.Keys = append(item.Keys, k)
		item.Vals = append(item.Vals, v)
	}
	add("eid", &Dict{Keys: []any{"batch", "task", "run", "step", "suffix"}, Vals: []any{r.batch, r.task, r.run, r.step, r.suffix}})
	add("reward", r.reward)
	add("truncate_status", r.truncateStatus)
	add("info", orEmpty(info))
	add("metrics", orEmpty(r.metrics))
	add("prompt_length", r.promptLength)
	add("response_text", r.responseText)
	add("prompt_text", r.promptText)
	add("messages", r.messages)
	add("tools", r.tools)
	add("chosen_messages", r.chosenMessages)
	add("rejected_messages", r.rejectedMessages)
	cf := r.customFields
	if cf == nil {
		cf = &List{}
	}
	add("custom_fields", cf)
	add("multi_modal_input_keys", &List{})
	return item
}

// tensors returns the payload's tensors: the token-level fields r has
// (ints, floats, the action mask, routed experts).
func (r *record) tensors() []namedTensor {
	var ts []namedTensor
	for k, v := range r.ints {
		if v.ok {
			b := make([]byte, 4*len(v.v))
			for i, x := range v.v {
				binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
			}
			ts = append(ts, namedTensor{intFieldNames[k], Tensor{"I32", []int64{int64(len(v.v))}, b}})
		}
	}
	for k, v := range r.floats {
		if v.ok {
			b := make([]byte, 4*len(v.v))
			for i, x := range v.v {
				binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
			}
			ts = append(ts, namedTensor{floatFieldNames[k], Tensor{"F32", []int64{int64(len(v.v))}, b}})
		}
	}
	if r.mask.ok {
		b := make([]byte, len(r.mask.v))
		for i, x := range r.mask.v {
			if x {
				b[i] = 1
			}
		}
		ts = append(ts, namedTensor{"action_mask", Tensor{"BOOL", []int64{int64(len(b))}, b}})
	}
	if r.routed.ok {
		ts = append(ts, namedTensor{schema.RoutedExperts, r.routed.tensor()})
	}
	return ts
}

// pyJSON renders a JSON column's text as SQLAlchemy stores it (json.dumps;
// None is the text null).
func pyJSON(name string, v any) (*string, *fieldError) {
	b, err := appendJSON(nil, v, true)
	if err != nil {
		return nil, ferr(name, "%v", err)
	}
	s := string(b)
	return &s, nil
}

func orEmpty(d *Dict) *Dict {
	if d == nil {
		return &Dict{}
	}
	return d
}

func ptr[T any](ok bool, v T) *T {
	if !ok {
		return nil
	}
	return &v
}

// String renders a kind for messages.
func (k Kind) String() string { return string(k) }

// ParseKind parses a schema_type name.
func ParseKind(s string) (Kind, error) {
	switch Kind(s) {
	case KindExperience, KindDPO, KindSFT:
		return Kind(s), nil
	}
	return "", fmt.Errorf("unknown schema_type %q (valid: experience, dpo, sft)", s)
}
