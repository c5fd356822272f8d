// Package schema defines the experience store: one row per experience, its
// column names and Arrow types, and the validation every stage relies on.
//
// Only the columns a stage needs are required (each stage declares them);
// unknown extra columns pass through every stage unchanged.
package schema

import (
	"sort"
	"strings"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
)

// Column names of the experience store. Users' SQL and every stage depend on them.
const (
	Batch            = "batch"
	Task             = "task"
	Run              = "run"
	Step             = "step"
	Suffix           = "suffix"
	Reward           = "reward"
	PromptLength     = "prompt_length"
	Tokens           = "tokens"
	Logprobs         = "logprobs"
	ActionMask       = "action_mask"
	TokenLevelReward = "token_level_reward"
	Advantages       = "advantages"
	Returns          = "returns"
	TeacherLogprobs  = "teacher_logprobs"
	Chosen           = "chosen"
	Rejected         = "rejected"
	TruncateStatus   = "truncate_status"
	ModelVersion     = "model_version"
	Info             = "info"
	Metrics          = "metrics"
	// DuplicateOf is written by the duplication stage: the input row index a
	// duplicated row copies (null for original rows).
	DuplicateOf = "duplicate_of"
	// DropReason and DroppedBy are the columns of a rejected-rows store
	// (rftpipe run --rejected): why a row was dropped, and by what.
	DropReason = "drop_reason"
	DroppedBy  = "dropped_by"

	// Trainer-side inputs: per-token list<float32> columns aligned with the
	// response (like logprobs), and one bool per row. A store carries them
	// when the trainer's values are logged next to the rollouts.
	Logprob    = "logprob"     // the current policy's log-probs (the differentiated input)
	OldLogprob = "old_logprob" // the trainer's recomputed old log-probs
	RefLogprob = "ref_logprob" // the reference model's log-probs
	Values     = "values"      // the critic's values
	Entropy    = "entropy"     // the policy's per-token entropy
	ExpertMask = "expert_mask" // bool per row: an expert (SFT) row of a mix batch
	// RolloutISWeights is written by the rollout-correction stage: the
	// truncated importance-sampling weights per token.
	RolloutISWeights = "rollout_is_weights"
	// GradLogprob is written by the loss step: dLoss/dlogprob per token.
	GradLogprob = "grad_logprob"
	// RoutedExperts is MoE router replay (Trinity-RFT 0.6): per token of
	// tokens but the last, per MoE layer, the top-k expert ids —
	// [len(tokens)-1][layers][top_k]. It is not in Order: it sorts with the
	// extra columns, as the stores Trinity's 0.6 exports have it.
	RoutedExperts = "routed_experts"
	// Experiment names a row's experiment in an experience table (package
	// schema/table), where it is also the partition. It is not in Order:
	// it sorts with the extra columns.
	Experiment = "experiment"
)

// PromptTruncated is the truncate_status of a row whose prompt was cut to
// fit. Trinity-RFT after 0.6 gives such a row placeholder routed_experts
// (arange % num_experts, not what a router chose): they are kept as they
// are and never counted as routing data (RoutingData).
const PromptTruncated = "prompt_truncated"

// RoutingData reports whether row i holds routing data: a routed_experts
// value on a row that is not PromptTruncated. routed and status are the
// rows' routed_experts and truncate_status columns, nil when absent.
func RoutingData(routed arrow.Array, status *array.String, i int) bool {
	return routed != nil && !routed.IsNull(i) && (status == nil || status.IsNull(i) || status.Value(i) != PromptTruncated)
}

// Type of each known column. batch and task may also be utf8 (see IDTypes).
var types = map[string]arrow.DataType{
	Batch:            arrow.PrimitiveTypes.Int64,
	Task:             arrow.PrimitiveTypes.Int64,
	Run:              arrow.PrimitiveTypes.Int32,
	Step:             arrow.PrimitiveTypes.Int32,
	Suffix:           arrow.BinaryTypes.String,
	Reward:           arrow.PrimitiveTypes.Float64,
	PromptLength:     arrow.PrimitiveTypes.Int32,
	Tokens:           arrow.ListOf(arrow.PrimitiveTypes.Int32),
	Logprobs:         arrow.ListOf(arrow.PrimitiveTypes.Float32),
	ActionMask:       arrow.ListOf(arrow.FixedWidthTypes.Boolean),
	TokenLevelReward: arrow.ListOf(arrow.PrimitiveTypes.Float32),
	Advantages:       arrow.ListOf(arrow.PrimitiveTypes.Float32),
	Returns:          arrow.ListOf(arrow.PrimitiveTypes.Float32),
	TeacherLogprobs:  arrow.ListOf(arrow.PrimitiveTypes.Float32),
	Chosen:           arrow.ListOf(arrow.PrimitiveTypes.Int32),
	Rejected:         arrow.ListOf(arrow.PrimitiveTypes.Int32),
	TruncateStatus:   arrow.BinaryTypes.String,
	ModelVersion:     arrow.PrimitiveTypes.Int64,
	Info:             arrow.BinaryTypes.String, // JSON text: pandas, polars and DuckDB read it as is
	Metrics:          arrow.BinaryTypes.String, // JSON text
	DuplicateOf:      arrow.PrimitiveTypes.Int64,
	DropReason:       arrow.BinaryTypes.String,
	DroppedBy:        arrow.BinaryTypes.String,
	Logprob:          arrow.ListOf(arrow.PrimitiveTypes.Float32),
	OldLogprob:       arrow.ListOf(arrow.PrimitiveTypes.Float32),
	RefLogprob:       arrow.ListOf(arrow.PrimitiveTypes.Float32),
	Values:           arrow.ListOf(arrow.PrimitiveTypes.Float32),
	Entropy:          arrow.ListOf(arrow.PrimitiveTypes.Float32),
	ExpertMask:       arrow.FixedWidthTypes.Boolean,
	RolloutISWeights: arrow.ListOf(arrow.PrimitiveTypes.Float32),
	GradLogprob:      arrow.ListOf(arrow.PrimitiveTypes.Float32),
	RoutedExperts:    arrow.ListOf(arrow.ListOf(arrow.ListOf(arrow.PrimitiveTypes.Int16))),
	Experiment:       arrow.BinaryTypes.String,
}

// Order is the canonical column order of a store written by rftpipe.
var Order = []string{
	Batch, Task, Run, Step, Suffix, Reward, PromptLength, Tokens, Logprobs, ActionMask,
	TokenLevelReward, Advantages, Returns, TeacherLogprobs, Chosen, Rejected,
	TruncateStatus, ModelVersion, Info, Metrics, DuplicateOf,
	Logprob, OldLogprob, RefLogprob, Values, Entropy, ExpertMask, RolloutISWeights, GradLogprob,
}

// Type returns the canonical Arrow type of a known column.
func Type(name string) (arrow.DataType, bool) {
	t, ok := types[name]
	return t, ok
}

// Field returns the canonical nullable field of a known column. It panics on
// an unknown name: callers pass the constants above.
func Field(name string) arrow.Field {
	t, ok := types[name]
	if !ok {
		panic("schema: unknown column " + name)
	}
	return arrow.Field{Name: name, Type: t, Nullable: true}
}

// New returns an Arrow schema of the named known columns, in the given order.
func New(names ...string) *arrow.Schema {
	fs := make([]arrow.Field, len(names))
	for i, n := range names {
		fs[i] = Field(n)
	}
	return arrow.NewSchema(fs, nil)
}

// accepts reports whether a store's type is accepted for a known column.
// Ids may be integers of any width or strings; lists may be large lists.
func accepts(name string, got arrow.DataType) bool {
	want := types[name]
	if arrow.TypeEqual(got, want) {
		return true
	}
	switch name {
	case Batch, Task:
		return isInteger(got) || isString(got)
	case Run, Step, PromptLength, ModelVersion, DuplicateOf:
		return isInteger(got)
	case Suffix, TruncateStatus, Info, Metrics:
		return isString(got)
	case Reward:
		return got.ID() == arrow.FLOAT64 || got.ID() == arrow.FLOAT32
	}
	if name == RoutedExperts {
		return nestedInts(got, 3)
	}
	if lw, ok := want.(*arrow.ListType); ok {
		var elem arrow.DataType
		switch l := got.(type) {
		case *arrow.ListType:
			elem = l.Elem()
		case *arrow.LargeListType:
			elem = l.Elem()
		default:
			return false
		}
		return arrow.TypeEqual(elem, lw.Elem())
	}
	return false
}

// nestedInts reports whether t is depth levels of lists (of any list kind)
// around integers.
func nestedInts(t arrow.DataType, depth int) bool {
	if depth == 0 {
		return isInteger(t)
	}
	switch l := t.(type) {
	case *arrow.ListType:
		return nestedInts(l.Elem(), depth-1)
	case *arrow.LargeListType:
		return nestedInts(l.Elem(), depth-1)
	case *arrow.FixedSizeListType:
		return nestedInts(l.Elem(), depth-1)
	}
	return false
}

func isInteger(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return true
	}
	return false
}

func isString(t arrow.DataType) bool {
	return t.ID() == arrow.STRING || t.ID() == arrow.LARGE_STRING
}

// Require checks that s has every named column with an accepted type. The
// error names the file and the first offending column, and lists what the
// store does have when a column is missing.
func Require(file string, s *arrow.Schema, names ...string) error {
	for _, n := range names {
		idx := s.FieldIndices(n)
		if len(idx) == 0 {
			have := make([]string, 0, s.NumFields())
			for _, f := range s.Fields() {
				have = append(have, f.Name)
			}
			sort.Strings(have)
			return Errorf(file, -1, n, "missing required column (store has: %s)", strings.Join(have, ", "))
		}
		got, role := s.Field(idx[0]).Type, Role(s, n)
		if _, known := types[role]; known && !accepts(role, got) {
			return Errorf(file, -1, n, "has type %s, want %s", got, types[role])
		}
	}
	return nil
}

// CheckKnown checks the type of every known column present in s, under
// its Role (response_mask as action_mask).
func CheckKnown(file string, s *arrow.Schema) error {
	for _, f := range s.Fields() {
		role := Role(s, f.Name)
		if _, known := types[role]; known && !accepts(role, f.Type) {
			return Errorf(file, -1, f.Name, "has type %s, want %s", f.Type, types[role])
		}
	}
	return nil
}
