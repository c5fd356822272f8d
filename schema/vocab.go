package schema

import "github.com/apache/arrow/go/v17/arrow"

// The per-token vocabulary: each store column a stage reads per token (or
// per row), the stages' name for it as an input (Trinity's naming, as in
// stages/tokens), and Trinity's and verl's other names for it. The one
// table below gives both directions, which differ where the column's and
// the input's names differ (teacher_logprobs, the column; teacher_logprob,
// the input):
//   - Aliases: a name of a store written by Trinity or verl → the column
//     (an Aliases or StoreAliases name, or the input's name);
//   - InputName: a name of an input → the canonical input (an Aliases
//     name, or the column's name).
//
// Inputs says, per input, the columns it is read from.

// vocab is one store column of the per-token vocabulary.
type vocab struct {
	column string
	// input is the stages' canonical input reading it ("" when none reads
	// it by name; stages reach it as a fallback, see Inputs).
	input string
	// aliases are Trinity's and verl's names of it, as inputs and as
	// store columns; storeAliases are names only stores use.
	aliases, storeAliases []string
	// fallback is the column input is read from when a store lacks column.
	fallback string
}

// vocabulary is the table, in the order the inputs are read.
var vocabulary = []vocab{
	// The current policy's log-prob of an offline store defaults to the
	// rollout logprobs — then ratio = 1, i.e. the loss and gradient at the
	// rollout policy, the first step of an update; the old log-probs
	// likewise (the trainer's bypass mode).
	{column: Logprob, input: "logprob", aliases: []string{"log_prob"}, fallback: Logprobs},
	{column: OldLogprob, input: "old_logprob", aliases: []string{"old_log_probs"}, storeAliases: []string{"old_log_prob"}, fallback: Logprobs},
	{column: RefLogprob, input: "ref_logprob", aliases: []string{"ref_log_prob"}},
	{column: Advantages, input: "advantages"},
	{column: ActionMask, input: "action_mask", aliases: []string{"response_mask"}},
	{column: TeacherLogprobs, input: "teacher_logprob"},
	{column: Entropy, input: "entropy", aliases: []string{"entropys"}},
	{column: Values, input: "values"},
	{column: ExpertMask, input: "expert_mask", storeAliases: []string{"is_expert"}},
	{column: RolloutISWeights, input: "rollout_is_weights"},
	{column: Logprobs, storeAliases: []string{"rollout_log_probs"}},
}

// Aliases maps Trinity-RFT's and verl's names of the per-token columns to
// the store's column names, for stores written with those names.
var Aliases = func() map[string]string {
	m := map[string]string{}
	for _, v := range vocabulary {
		for _, a := range v.aliases {
			m[a] = v.column
		}
		for _, a := range v.storeAliases {
			m[a] = v.column
		}
		if v.input != "" && v.input != v.column {
			m[v.input] = v.column
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

// inputAliases maps Trinity's and verl's names of the inputs to the
// canonical input names (upstream's key mapper).
var inputAliases = func() map[string]string {
	m := map[string]string{}
	for _, v := range vocabulary {
		if v.input == "" {
			continue
		}
		for _, a := range v.aliases {
			m[a] = v.input
		}
		if v.column != v.input {
			m[v.column] = v.input
		}
	}
	return m
}()

// InputName maps an input name to its canonical name: Trinity's and verl's
// names (log_prob, old_log_probs, ref_log_prob, response_mask, entropys,
// teacher_logprobs) are translated, any other name is returned unchanged,
// as upstream's key mapper does.
func InputName(name string) string {
	if c, ok := inputAliases[name]; ok {
		return c
	}
	return name
}

// InputColumns is one input of the stages (its canonical name) and the
// store columns it is read from: the first of them the store has.
type InputColumns struct {
	Input   string
	Columns []string
}

// Inputs are the stages' per-token (and per-row) inputs with their store
// columns, in the order they are read.
var Inputs = func() []InputColumns {
	var out []InputColumns
	for _, v := range vocabulary {
		if v.input == "" {
			continue
		}
		cols := []string{v.column}
		if v.fallback != "" {
			cols = append(cols, v.fallback)
		}
		out = append(out, InputColumns{v.input, cols})
	}
	return out
}()
