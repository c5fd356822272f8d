package schema

import (
	"github.com/apache/arrow/go/v17/arrow"
)

// Input is one input of the stages, per token or per row, named by its
// canonical name (Trinity's naming, as in stages/tokens). One table gives,
// per input, its store column, the column it falls back to, and verl's and
// the stores' other names of it; every list of inputs (messages, help
// texts) comes from it. The table gives both directions, which differ where
// the column's and the input's names differ (teacher_logprobs, the column;
// teacher_logprob, the input):
//   - Aliases: a name of a store written by Trinity or verl → the column
//     (a verl or store-only name, or the input's name);
//   - InputName: a name of an input → the canonical input (a verl name, or
//     the column's name).
type Input string

// The inputs, in the order they are read.
const (
	InLogprob    Input = "logprob"     // the current policy's log-prob, the differentiated input
	InOldLogprob Input = "old_logprob" // the behaviour ("old") policy's log-prob
	InRefLogprob Input = "ref_logprob" // the reference model's log-prob
	InAdvantages Input = "advantages"  // per-token advantages
	InActionMask Input = "action_mask" // 1 = trained on; may be fractional
	// InTeacherLogprob is the teacher's log-prob (distillation).
	InTeacherLogprob Input = "teacher_logprob"
	InEntropy        Input = "entropy"     // the policy's per-token entropy
	InValues         Input = "values"      // the critic's values
	InExpertMask     Input = "expert_mask" // bool per row: an expert (SFT) row
	// InRolloutISWeights are the rollout-correction IS weights (constants,
	// multiplied into the per-token loss of the losses that take them).
	InRolloutISWeights Input = "rollout_is_weights"
)

// VerlRolloutLogprobs is verl's name of the rollout log-probs, the store's
// logprobs column (an input of verl's trainer-side fns, none of the stages').
const VerlRolloutLogprobs = "rollout_log_probs"

// vocab is one store column of the per-token vocabulary.
type vocab struct {
	column string
	// input is the stages' canonical input reading it ("" when none reads
	// it by name; stages reach it as a fallback).
	input Input
	// verl is verl's name of it, as an input and as a store column (""
	// when verl has none, or names it as input does).
	verl string
	// storeAliases are names only stores use.
	storeAliases []string
	// fallback is the column input is read from when a store lacks column.
	fallback string
	// perRow: one value per row, not per token.
	perRow bool
}

// vocabulary is the table, in the order the inputs are read.
var vocabulary = []vocab{
	// The current policy's log-prob of an offline store defaults to the
	// rollout logprobs — then ratio = 1, i.e. the loss and gradient at the
	// rollout policy, the first step of an update; the old log-probs
	// likewise (the trainer's bypass mode).
	{column: Logprob, input: InLogprob, verl: "log_prob", fallback: Logprobs},
	{column: OldLogprob, input: InOldLogprob, verl: "old_log_probs", storeAliases: []string{"old_log_prob"}, fallback: Logprobs},
	{column: RefLogprob, input: InRefLogprob, verl: "ref_log_prob"},
	{column: Advantages, input: InAdvantages},
	{column: ActionMask, input: InActionMask, verl: "response_mask"},
	{column: TeacherLogprobs, input: InTeacherLogprob, verl: "teacher_logprobs"},
	{column: Entropy, input: InEntropy, verl: "entropys"},
	{column: Values, input: InValues},
	{column: ExpertMask, input: InExpertMask, storeAliases: []string{"is_expert"}, perRow: true},
	{column: RolloutISWeights, input: InRolloutISWeights},
	{column: Logprobs, verl: VerlRolloutLogprobs},
}

// inputs indexes vocabulary by input.
var inputs = func() map[Input]vocab {
	m := map[Input]vocab{}
	for _, v := range vocabulary {
		if v.input != "" {
			m[v.input] = v
		}
	}
	return m
}()

// Inputs returns every input, in the order they are read.
func Inputs() []Input {
	var out []Input
	for _, v := range vocabulary {
		if v.input != "" {
			out = append(out, v.input)
		}
	}
	return out
}

// InputNames returns the canonical names of every input, in the order they
// are read: the list messages and help texts give.
func InputNames() []string {
	var out []string
	for _, in := range Inputs() {
		out = append(out, string(in))
	}
	return out
}

// ParseInput returns the input name stands for: a canonical name, or
// Trinity's or verl's name of an input (InputName).
func ParseInput(name string) (Input, bool) {
	in := Input(InputName(name))
	_, ok := inputs[in]
	return in, ok
}

// Columns returns the store columns in is read from: the first of them the
// store has.
func (in Input) Columns() []string {
	v := inputs[in]
	if v.fallback == "" {
		return []string{v.column}
	}
	return []string{v.column, v.fallback}
}

// Verl returns verl's name of in (its own name when verl's is the same).
func (in Input) Verl() string {
	if v := inputs[in]; v.verl != "" {
		return v.verl
	}
	return string(in)
}

// PerRow reports whether in has one value per row, not per token.
func (in Input) PerRow() bool { return inputs[in].perRow }

// Aliases maps Trinity-RFT's and verl's names of the per-token columns to
// the store's column names, for stores written with those names.
var Aliases = func() map[string]string {
	m := map[string]string{}
	for _, v := range vocabulary {
		for _, a := range append([]string{v.verl, string(v.input)}, v.storeAliases...) {
			if a != "" && a != v.column {
				m[a] = v.column
			}
		}
	}
	return m
}()

// Role returns the column of rftpipe's vocabulary that the column name of
// the store schema s holds: name itself when it is one, else the column a
// Trinity or verl name stands for (Aliases: response_mask for action_mask)
// when s has no column of that name, else name.
func Role(s *arrow.Schema, name string) string {
	if _, known := types[name]; known {
		return name
	}
	if c, ok := Aliases[name]; ok && len(s.FieldIndices(c)) == 0 {
		return c
	}
	return name
}

// ColumnIndex returns the index of the column of s holding name (Role), -1
// when s has none; the first of them in s's order.
func ColumnIndex(s *arrow.Schema, name string) int {
	for i, f := range s.Fields() {
		if Role(s, f.Name) == name {
			return i
		}
	}
	return -1
}

// inputAliases maps verl's names of the inputs, and their columns' names,
// to the canonical input names (upstream's key mapper).
var inputAliases = func() map[string]Input {
	m := map[string]Input{}
	for _, v := range vocabulary {
		if v.input == "" {
			continue
		}
		for _, a := range []string{v.verl, v.column} {
			if a != "" && a != string(v.input) {
				m[a] = v.input
			}
		}
	}
	return m
}()

// InputName maps an input name to its canonical name: verl's names
// (log_prob, old_log_probs, ref_log_prob, response_mask, entropys,
// teacher_logprobs) are translated, any other name is returned unchanged,
// as upstream's key mapper does.
func InputName(name string) string {
	if c, ok := inputAliases[name]; ok {
		return string(c)
	}
	return name
}
