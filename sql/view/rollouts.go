package view

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/sql/duckdb"
)

// Bounds of what the group page shows of each rollout.
const (
	snippetChars  = 600 // characters of a response's text
	snippetTokens = 96  // response token ids, when the store has no text
	rowGap        = 256 // rows read between two wanted ones rather than another query
)

// readRows reads the rows (by row number) of the Parquet file k of source
// s, the columns named (all: none named), keyed by row number. Rows near
// each other are read by one query (rollout_read.sql), whose filter on the
// row number the Parquet reader applies.
func (v *Viewer) readRows(ctx context.Context, s source, k int64, want []int64, columns ...string) (map[int64]record, error) {
	if k < 0 || k >= int64(len(s.files)) {
		return nil, fmt.Errorf("view: the store %s has no file %d", s.name, k)
	}
	want = slices.Clone(want)
	slices.Sort(want)
	cols := "*"
	if len(columns) > 0 {
		quoted := make([]string, len(columns))
		for i, c := range columns {
			quoted[i] = duckdb.QuoteIdent(c)
		}
		cols = strings.Join(quoted, ", ")
	}
	q := query("rollout_read", map[string]string{"file": s.readFile(int(k)), "columns": cols})
	out := map[int64]record{}
	for i := 0; i < len(want); {
		j := i + 1
		for j < len(want) && want[j]-want[j-1] <= rowGap {
			j++
		}
		recs, err := v.records(ctx, q, want[i], want[j-1])
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			n := asInt(r["file_row_number"])
			if _, ok := slices.BinarySearch(want[i:j], n); ok {
				delete(r, "file_row_number")
				out[n] = r
			}
		}
		i = j
	}
	return out, nil
}

// groupData is a group's page: its rollouts side by side.
type groupData struct {
	Experiment  string
	Batch, Task string
	Group       record
	Rollouts    []card
}

// card is one rollout of a group: its index row and the start of its response.
type card struct {
	Index     record
	Text      string // the response's text, or its first token ids
	IsText    bool
	Truncated bool
}

// group shows one group's rollouts side by side.
func (v *Viewer) group(w http.ResponseWriter, r *http.Request) error {
	p, err := parseParams(r, "experiment", "batch", "task")
	if err != nil {
		return err
	}
	exp, err := v.experiment(p, true)
	if err != nil {
		return err
	}
	batch, err := p.key("batch")
	if err != nil {
		return err
	}
	task, err := p.key("task")
	if err != nil {
		return err
	}
	ctx := r.Context()
	groups, err := v.records(ctx, "SELECT * FROM groups WHERE experiment = ? AND batch = ? AND task = ?", exp, batch, task)
	if err != nil {
		return err
	}
	if len(groups) == 0 && exp != "" {
		return notFound("the experiment %q has no group batch %q, task %q", exp, batch, task)
	}
	if len(groups) == 0 {
		return notFound("the store has no group batch %q, task %q", batch, task)
	}
	idx, err := v.records(ctx, query("group_rollouts", nil), exp, batch, task)
	if err != nil {
		return err
	}
	// The rows to read, per source and file.
	type fileKey struct{ src, file int64 }
	want := map[fileKey][]int64{}
	for _, x := range idx {
		k := fileKey{asInt(x["src"]), asInt(x["file"])}
		want[k] = append(want[k], asInt(x["file_row"]))
	}
	read := map[fileKey]map[int64]record{}
	for k, rows := range want {
		if read[k], err = v.readRows(ctx, v.sources[k.src], k.file, rows, v.sources[k.src].snippetColumns()...); err != nil {
			return err
		}
	}
	d := groupData{Experiment: exp, Batch: batch, Task: task, Group: groups[0]}
	for _, x := range idx {
		k := fileKey{asInt(x["src"]), asInt(x["file"])}
		c := card{Index: x}
		c.Text, c.IsText, c.Truncated = snippet(v.sources[k.src], read[k][asInt(x["file_row"])])
		d.Rollouts = append(d.Rollouts, c)
	}
	return v.render(w, "group", v.page(fmt.Sprintf("Group %s/%s", batch, task), d))
}

// snippet returns the start of a row's response: its text when the source
// has some, else its response token ids.
func snippet(s source, row record) (text string, isText, truncated bool) {
	if c := s.textColumn(); c != "" {
		if t, ok := row[c].(string); ok {
			r := []rune(t)
			if len(r) > snippetChars {
				return string(r[:snippetChars]), true, true
			}
			return t, true, false
		}
	}
	toks, prompt := responseTokens(row)
	ids := toks[prompt:]
	parts := make([]string, 0, min(len(ids), snippetTokens))
	for _, id := range ids[:min(len(ids), snippetTokens)] {
		parts = append(parts, fmt.Sprint(id))
	}
	return strings.Join(parts, " "), false, len(ids) > snippetTokens
}

// snippetColumns are the columns snippet reads.
func (s source) snippetColumns() []string {
	if c := s.textColumn(); c != "" {
		return []string{c}
	}
	var cols []string
	for _, c := range []string{schema.Tokens, schema.PromptLength} {
		if s.has(c) {
			cols = append(cols, c)
		}
	}
	return cols
}

// responseTokens returns a row's token ids and where its response starts.
func responseTokens(row record) ([]any, int) {
	toks, _ := row[schema.Tokens].([]any)
	prompt := int(asInt(row[schema.PromptLength]))
	if prompt < 0 || prompt > len(toks) {
		prompt = 0
	}
	return toks, prompt
}

// rolloutData is a rollout's page.
type rolloutData struct {
	ID        int64
	Index     record
	Prompt    string // prompt_text, when the store has it
	Response  string // response_text
	Messages  string // messages, indented
	Color     string // the column the tokens are coloured by
	Colors    []string
	Tokens    []token
	ColorNote string   // why the tokens are not coloured by Color, if so
	Scalars   [][2]any // the row's other columns (name, value)
	Lists     []string // its list columns
}

// token is one token as the page shows it.
type token struct {
	ID     string
	Prompt bool
	Class  string // colour class: s0…s10 (magnitude) or d0…d10 (sign, 5 = 0)
	Title  string // the value shown on hover
	Mark   bool   // part of the searched token sequence
}

// rollout shows one rollout: its text and its tokens coloured by a
// per-token column.
func (v *Viewer) rollout(w http.ResponseWriter, r *http.Request) error {
	p, err := parseParams(r, "id", "color", "mark")
	if err != nil {
		return err
	}
	if _, err := p.required("id"); err != nil {
		return err
	}
	id, err := p.int("id", 0, v.n-1, 0)
	if err != nil {
		return err
	}
	var mark []int64
	if m := p.str("mark"); m != "" {
		if mark, err = tokenSeq(m); err != nil {
			return err
		}
	}
	ctx := r.Context()
	idx, err := v.records(ctx, query("rollout_index", nil), id)
	if err != nil {
		return err
	}
	x := idx[0]
	s := v.sources[asInt(x["src"])]
	rows, err := v.readRows(ctx, s, asInt(x["file"]), []int64{asInt(x["file_row"])})
	if err != nil {
		return err
	}
	row, ok := rows[asInt(x["file_row"])]
	if !ok {
		return fmt.Errorf("view: row %d of %s is gone", asInt(x["file_row"]), s.files[asInt(x["file"])])
	}
	d := rolloutData{ID: id, Index: x}
	d.Prompt, _ = row["prompt_text"].(string)
	d.Response, _ = row["response_text"].(string)
	if m, ok := row["messages"].(string); ok {
		d.Messages = indentJSON(m)
	}
	for _, c := range s.tokenColumns() {
		if row[c] != nil {
			d.Colors = append(d.Colors, c)
		}
	}
	def := ""
	for _, c := range []string{schema.Advantages, schema.Logprobs, schema.Entropy, schema.ActionMask} {
		if slices.Contains(d.Colors, c) {
			def = c
			break
		}
	}
	if def == "" && len(d.Colors) > 0 {
		def = d.Colors[0]
	}
	all := s.tokenColumns()
	if d.Color, err = p.oneOf("color", all, def); err != nil {
		return err
	}
	d.Tokens, d.ColorNote = colourTokens(row, d.Color, mark)
	for _, c := range s.order {
		switch {
		case strings.HasSuffix(s.cols[c], "[]"):
			d.Lists = append(d.Lists, fmt.Sprintf("%s (%d)", c, len(asList(row[c]))))
		case c != "prompt_text" && c != "response_text" && c != "messages":
			d.Scalars = append(d.Scalars, [2]any{c, row[c]})
		}
	}
	return v.render(w, "rollout", v.page(fmt.Sprintf("Rollout %d", id), d))
}

// colourTokens returns the row's tokens, those of the response coloured by
// the per-token column col (aligned with the response, or with every token
// when as long as tokens), marking the occurrences of the sequence mark; the
// note says why the tokens are not coloured, when they are not.
func colourTokens(row record, col string, mark []int64) ([]token, string) {
	toks, prompt := responseTokens(row)
	out := make([]token, len(toks))
	for i, t := range toks {
		out[i] = token{ID: fmt.Sprint(t), Prompt: i < prompt}
	}
	for i := 0; len(mark) > 0 && i+len(mark) <= len(toks); i++ {
		match := true
		for k, m := range mark {
			if asInt(toks[i+k]) != m {
				match = false
				break
			}
		}
		for k := range mark {
			out[i+k].Mark = out[i+k].Mark || match
		}
	}
	if col == "" {
		return out, "the store has no per-token column to colour by"
	}
	vals := asList(row[col])
	start := prompt
	switch {
	case row[col] == nil:
		return out, col + " is null in this row"
	case len(vals) == len(toks):
		start = 0
	case len(vals) != len(toks)-prompt:
		return out, fmt.Sprintf("%s has %d values: neither the response's %d tokens nor all %d", col, len(vals), len(toks)-prompt, len(toks))
	}
	f := make([]float64, len(vals))
	peak, lo, hi := 0.0, math.Inf(1), math.Inf(-1)
	for i, x := range vals {
		f[i] = asFloat(x)
		if !math.IsNaN(f[i]) && !math.IsInf(f[i], 0) {
			peak, lo, hi = math.Max(peak, math.Abs(f[i])), math.Min(lo, f[i]), math.Max(hi, f[i])
		}
	}
	signed := lo < 0 && hi > 0
	for i, x := range f {
		t := &out[start+i]
		t.Title = fmt.Sprintf("%s[%d] = %s", col, i, formatValue(vals[i]))
		switch {
		case math.IsNaN(x) || math.IsInf(x, 0) || peak == 0:
			t.Class = "s0"
		case signed:
			t.Class = "d" + strconv.Itoa(int(math.Round(5+5*x/peak)))
		default:
			t.Class = "s" + strconv.Itoa(int(math.Round(10*math.Abs(x)/peak)))
		}
	}
	return out, ""
}

// indentJSON indents JSON text, or returns it as it is when it is not JSON.
func indentJSON(s string) string {
	var b bytes.Buffer
	if json.Indent(&b, []byte(s), "", "  ") != nil {
		return s
	}
	return b.String()
}
