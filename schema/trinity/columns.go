package trinity

import (
	"fmt"
	"math"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"

	"github.com/rftpipe/rftpipe/schema"
)

// Kind is a buffer table's schema type (Trinity's `schema_type`).
type Kind string

// The three table layouts.
const (
	KindExperience Kind = "experience"
	KindDPO        Kind = "dpo"
	KindSFT        Kind = "sft"
)

// Store columns the item fields without a column of their own map to: JSON
// text (message lists, tools, custom fields) or text.
const (
	ColMessages         = "messages"
	ColTools            = "tools"
	ColChosenMessages   = "chosen_messages"
	ColRejectedMessages = "rejected_messages"
	ColCustomFields     = "custom_fields"
	ColPromptText       = "prompt_text"
	ColResponseText     = "response_text"
)

// columns returns the store columns a table of kind k yields, in order:
// schema.Order's known columns, then the extra ones sorted by name, as the
// JSONL reader orders them. Experience and SFT rows carry the per-token
// lists and no chosen/rejected; DPO rows the reverse.
func (k Kind) columns() []string {
	cols := []string{schema.Batch, schema.Task, schema.Run, schema.Step, schema.Suffix, schema.Reward, schema.PromptLength, schema.Tokens}
	if k == KindDPO {
		cols = append(cols, schema.Chosen, schema.Rejected)
	} else {
		cols = append(cols, schema.Logprobs, schema.ActionMask, schema.TokenLevelReward, schema.Advantages, schema.Returns, schema.TeacherLogprobs)
	}
	cols = append(cols, schema.TruncateStatus, schema.ModelVersion, schema.Info, schema.Metrics)
	if k == KindDPO {
		return append(cols, ColChosenMessages, ColCustomFields, ColMessages, ColPromptText, ColRejectedMessages, ColResponseText, schema.RoutedExperts, ColTools)
	}
	return append(cols, ColCustomFields, ColMessages, ColPromptText, ColResponseText, schema.RoutedExperts, ColTools)
}

// carried reports whether a non-empty tensor field fits a table of kind k.
func (k Kind) check(r *record) *fieldError {
	if k == KindDPO {
		for i, name := range floatFieldNames {
			if r.floats[i].ok {
				return ferr(name, "a per-token list in a dpo table: the store's DPO rows have no column for it")
			}
		}
		if r.mask.ok {
			return ferr("action_mask", "a dpo table row without chosen and rejected: the store's DPO rows have no action_mask")
		}
		return nil
	}
	for _, f := range []int{fChosen, fRejected} {
		if r.ints[f].ok {
			return ferr(intFieldNames[f], "chosen/rejected in a %s table: only dpo tables carry them", k)
		}
	}
	for _, v := range []struct {
		name string
		v    any
	}{{ColChosenMessages, r.chosenMessages}, {ColRejectedMessages, r.rejectedMessages}} {
		if v.v != nil {
			return ferr(v.name, "set in a %s table: only dpo tables carry it", k)
		}
	}
	return nil
}

// storeSchema returns the Arrow schema of a table of kind k; batch and task
// are utf8 when ids says so (their first row's type), int64 otherwise.
// wanted, when not empty, selects columns.
func (k Kind) storeSchema(lay Layout, strBatch, strTask bool, wanted []string) *arrow.Schema {
	var fields []arrow.Field
	for _, name := range k.columns() {
		if len(wanted) > 0 && !contains(wanted, name) {
			continue
		}
		var f arrow.Field
		if _, known := schema.Type(name); known {
			f = schema.Field(name)
		} else {
			f = arrow.Field{Name: name, Type: arrow.BinaryTypes.String, Nullable: true}
		}
		if (name == schema.Batch && strBatch) || (name == schema.Task && strTask) {
			f.Type = arrow.BinaryTypes.String
		}
		fields = append(fields, f)
	}
	md := arrow.NewMetadata([]string{MetaSchemaType, MetaLayout}, []string{string(k), string(lay)})
	return arrow.NewSchema(fields, &md)
}

// MetaSchemaType is the schema metadata key under which a store read from a
// buffer records the table's layout, so that writing it to a new table
// without schema_type keeps the layout.
const MetaSchemaType = "trinity.schema_type"

// MetaLayout is the schema metadata key under which a store read from a
// buffer records the buffer's layout (0.5, 0.6 or mixed), so that writing
// it to a new table without layout keeps 0.6.
const MetaLayout = "trinity.layout"

// KindOf is the schema type of a table made for rows of store schema s
// when the URL names none: the type of the buffer s was read from
// (MetaSchemaType), else dpo when s has chosen and rejected, else
// experience. A dpo type needs the chosen and rejected columns: without
// them the rows are not DPO pairs, whatever the metadata says.
func KindOf(s *arrow.Schema) Kind {
	pairs := len(s.FieldIndices(schema.Chosen)) > 0 && len(s.FieldIndices(schema.Rejected)) > 0
	if v, ok := s.Metadata().GetValue(MetaSchemaType); ok {
		if k, err := ParseKind(v); err == nil && (k != KindDPO || pairs) {
			return k
		}
	}
	if pairs {
		return KindDPO
	}
	return KindExperience
}

// StoreMeta returns the buffer metadata of md that a store carries from
// file to file (every store format writes a schema's metadata): MetaSchemaType
// and MetaLayout where they hold a value a buffer's read sets; nil when
// neither does. A value no read sets (a hand-written layout "0.7", say) is
// dropped, so it decides nothing when the store is written to a buffer.
func StoreMeta(md arrow.Metadata) *arrow.Metadata {
	var keys, vals []string
	if v, ok := md.GetValue(MetaSchemaType); ok {
		if _, err := ParseKind(v); err == nil {
			keys, vals = append(keys, MetaSchemaType), append(vals, v)
		}
	}
	if v, ok := md.GetValue(MetaLayout); ok {
		switch Layout(v) {
		case Layout05, Layout06, LayoutMixed:
			keys, vals = append(keys, MetaLayout), append(vals, v)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	m := arrow.NewMetadata(keys, vals)
	return &m
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// appender appends one record's value of a column to its builder.
type appender func(b array.Builder, r *record, buf *[]byte) *fieldError

// appenders returns one appender per field of s.
func appenders(s *arrow.Schema) []appender {
	out := make([]appender, s.NumFields())
	for i, f := range s.Fields() {
		out[i] = appenderFor(f)
	}
	return out
}

func appenderFor(f arrow.Field) appender {
	id := func(get func(r *record) any) appender {
		if f.Type.ID() == arrow.STRING {
			return func(b array.Builder, r *record, _ *[]byte) *fieldError {
				switch v := get(r).(type) {
				case nil:
					b.AppendNull()
				case string:
					b.(*array.StringBuilder).Append(v)
				case int64:
					b.(*array.StringBuilder).Append(*idText(v))
				}
				return nil
			}
		}
		return func(b array.Builder, r *record, _ *[]byte) *fieldError {
			switch v := get(r).(type) {
			case nil:
				b.AppendNull()
			case int64:
				b.(*array.Int64Builder).Append(v)
			case string:
				return ferr(f.Name, "string id %q after integer ids (the first row fixes the column's type)", v)
			}
			return nil
		}
	}
	int32Of := func(get func(r *record) any) appender {
		return func(b array.Builder, r *record, _ *[]byte) *fieldError {
			v, ok := get(r).(int64)
			switch {
			case !ok:
				b.AppendNull()
			case v < math.MinInt32 || v > math.MaxInt32:
				return ferr(f.Name, "%d does not fit int32", v)
			default:
				b.(*array.Int32Builder).Append(int32(v))
			}
			return nil
		}
	}
	text := func(get func(r *record) any) appender {
		return func(b array.Builder, r *record, _ *[]byte) *fieldError {
			if s, ok := get(r).(string); ok {
				b.(*array.StringBuilder).Append(s)
			} else {
				b.AppendNull()
			}
			return nil
		}
	}
	// jsonText writes a value as compact JSON; empty dicts and lists as null.
	jsonText := func(get func(r *record) any) appender {
		return func(b array.Builder, r *record, buf *[]byte) *fieldError {
			v := get(r)
			switch x := v.(type) {
			case *Dict:
				if x == nil || len(x.Keys) == 0 {
					v = nil
				}
			case *List:
				if x == nil || (len(x.Items) == 0 && (f.Name == schema.Info || f.Name == schema.Metrics || f.Name == ColCustomFields)) {
					v = nil
				}
			}
			if v == nil {
				b.AppendNull()
				return nil
			}
			out, err := appendJSON((*buf)[:0], v, false)
			if err != nil {
				return ferr(f.Name, "%v", err)
			}
			*buf = out
			b.(*array.StringBuilder).BinaryBuilder.Append(out)
			return nil
		}
	}
	ints := func(k int) appender {
		return func(b array.Builder, r *record, _ *[]byte) *fieldError {
			appendList(b, r.ints[k])
			return nil
		}
	}
	floats := func(k int) appender {
		return func(b array.Builder, r *record, _ *[]byte) *fieldError {
			appendList(b, r.floats[k])
			return nil
		}
	}
	switch f.Name {
	case schema.Batch:
		return id(func(r *record) any { return r.batch })
	case schema.Task:
		return id(func(r *record) any { return r.task })
	case schema.Suffix:
		return func(b array.Builder, r *record, _ *[]byte) *fieldError {
			if s := idText(r.suffix); s != nil {
				b.(*array.StringBuilder).Append(*s)
			} else {
				b.AppendNull()
			}
			return nil
		}
	case schema.Run:
		return int32Of(func(r *record) any { return r.run })
	case schema.Step:
		return int32Of(func(r *record) any { return r.step })
	case schema.PromptLength:
		return int32Of(func(r *record) any { return r.promptLength })
	case schema.Reward:
		return func(b array.Builder, r *record, _ *[]byte) *fieldError {
			if v, ok := r.reward.(float64); ok {
				b.(*array.Float64Builder).Append(v)
			} else {
				b.AppendNull()
			}
			return nil
		}
	case schema.ModelVersion:
		return func(b array.Builder, r *record, _ *[]byte) *fieldError {
			if v, ok := r.modelVersion.(int64); ok {
				b.(*array.Int64Builder).Append(v)
			} else {
				b.AppendNull()
			}
			return nil
		}
	case schema.TruncateStatus:
		return text(func(r *record) any { return r.truncateStatus })
	case ColPromptText:
		return text(func(r *record) any { return r.promptText })
	case ColResponseText:
		return text(func(r *record) any { return r.responseText })
	case schema.Info:
		return jsonText(func(r *record) any { return r.info })
	case schema.Metrics:
		return jsonText(func(r *record) any { return r.metrics })
	case ColCustomFields:
		return jsonText(func(r *record) any { return r.customFields })
	case ColMessages:
		return jsonText(func(r *record) any { return r.messages })
	case ColTools:
		return jsonText(func(r *record) any { return r.tools })
	case ColChosenMessages:
		return jsonText(func(r *record) any { return r.chosenMessages })
	case ColRejectedMessages:
		return jsonText(func(r *record) any { return r.rejectedMessages })
	case schema.Tokens:
		return ints(fTokens)
	case schema.Chosen:
		return ints(fChosen)
	case schema.Rejected:
		return ints(fRejected)
	case schema.ActionMask:
		return func(b array.Builder, r *record, _ *[]byte) *fieldError {
			appendList(b, r.mask)
			return nil
		}
	case schema.RoutedExperts:
		return func(b array.Builder, r *record, _ *[]byte) *fieldError {
			appendRouted(b.(*array.ListBuilder), &r.routed)
			return nil
		}
	}
	for k, name := range floatFieldNames {
		if name == f.Name {
			return floats(k)
		}
	}
	panic("trinity: no appender for column " + f.Name)
}

// appendList appends a tensor to a list builder of its element type.
func appendList[T int32 | float32 | bool](b array.Builder, v vec[T]) {
	lb := b.(*array.ListBuilder)
	if !v.ok {
		lb.AppendNull()
		return
	}
	lb.Append(true)
	switch vb := lb.ValueBuilder().(type) {
	case *array.Int32Builder:
		vb.AppendValues(any(v.v).([]int32), nil)
	case *array.Float32Builder:
		vb.AppendValues(any(v.v).([]float32), nil)
	case *array.BooleanBuilder:
		vb.AppendValues(any(v.v).([]bool), nil)
	default:
		panic(fmt.Sprintf("trinity: list of %T", vb))
	}
}

// appendRouted appends routed_experts as a list (tokens) of lists (layers)
// of int16 lists (top-k ids).
func appendRouted(tb *array.ListBuilder, ro *routed) {
	if !ro.ok {
		tb.AppendNull()
		return
	}
	tb.Append(true)
	lb := tb.ValueBuilder().(*array.ListBuilder)
	kb := lb.ValueBuilder().(*array.ListBuilder)
	vb := kb.ValueBuilder().(*array.Int16Builder)
	layers, k := ro.shape[1], ro.shape[2]
	for t := 0; t < ro.shape[0]; t++ {
		lb.Append(true)
		for l := 0; l < layers; l++ {
			kb.Append(true)
			at := (t*layers + l) * k
			vb.AppendValues(ro.v[at:at+k], nil)
		}
	}
}
