// Package inspect summarises an experience store as `rftpipe inspect` shows
// it: schema, rows, distinct batches/tasks/runs/steps, reward and
// response-length statistics. It validates every row as it reads (ragged
// lists, null ids, token/mask mismatches, non-finite log-probs): a store
// that inspects cleanly is one every command can read. Invalid rewards
// (null, NaN, ±Inf) are counted, not refused, since finding them is what
// inspect is for.
package inspect

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"text/tabwriter"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/schema/trinity"
)

// Summary is what `rftpipe inspect --format json` prints; scripts rely on
// rows and tasks.
type Summary struct {
	Store    string   `json:"store"`
	Files    int      `json:"files"`
	Columns  []Column `json:"columns"`
	Rows     int64    `json:"rows"`
	Batches  int      `json:"batches"`
	Tasks    int      `json:"tasks"` // distinct batch/task
	Runs     int      `json:"runs"`  // distinct batch/task/run
	Steps    int      `json:"steps"` // distinct step values
	Reward   *Stats   `json:"reward,omitempty"`
	Response *Stats   `json:"response_length,omitempty"`
	// Routing counts the routed_experts values (when the column exists).
	Routing *Routing `json:"routed_experts,omitempty"`
	// Buffer describes a Trinity-RFT buffer's layout and schema type (empty
	// for files); Warnings are the rows it read but did not yield.
	Buffer   string   `json:"buffer,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

// Column is a column's name and Arrow type.
type Column struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// Routing counts the rows with routed_experts: those holding routing data
// and the prompt-truncated rows' placeholders (schema.RoutingData).
type Routing struct {
	Rows         int64 `json:"rows"`
	Placeholders int64 `json:"prompt_truncated_placeholders"`
}

// Stats is a streaming count/mean/std/min/max (Welford); Std is the
// unbiased sample std.
type Stats struct {
	Count   int64   `json:"count"`
	Invalid int64   `json:"invalid,omitempty"` // null, NaN or Inf
	Mean    float64 `json:"mean"`
	Std     float64 `json:"std"`
	Min     float64 `json:"min"`
	Max     float64 `json:"max"`
	m2      float64
}

// Add adds a value; a NaN or infinite one counts as invalid.
func (s *Stats) Add(v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		s.Invalid++
		return
	}
	if s.Count == 0 {
		s.Min, s.Max = v, v
	}
	s.Count++
	d := v - s.Mean
	s.Mean += d / float64(s.Count)
	s.m2 += d * (v - s.Mean)
	s.Min, s.Max = math.Min(s.Min, v), math.Max(s.Max, v)
	if s.Count > 1 {
		s.Std = math.Sqrt(s.m2 / float64(s.Count-1))
	}
}

// lengthColumns are where response lengths come from: the first present.
var lengthColumns = []string{schema.ActionMask, schema.Logprobs, schema.Chosen}

// Store reads and validates every row of the store at path and summarises
// it. A bad row is an error naming the file, row and column (schema.ErrBadInput).
func Store(ctx context.Context, path string) (*Summary, error) {
	r, err := store.Open(path, store.Context(ctx))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	sc := r.Schema()
	sum := &Summary{Store: schema.Redact(path), Files: len(r.Files()), Buffer: bufferLayout(sc)}
	for _, f := range sc.Fields() {
		sum.Columns = append(sum.Columns, Column{f.Name, f.Type.String()})
	}
	lenCol := ""
	for _, n := range lengthColumns {
		if i := schema.ColumnIndex(sc, n); i >= 0 {
			lenCol = sc.Field(i).Name
			break
		}
	}
	get := func(rec arrow.Record, name string) arrow.Array {
		if idx := sc.FieldIndices(name); len(idx) > 0 {
			return rec.Column(idx[0])
		}
		return nil
	}
	batches, tasks, runs, steps := map[string]struct{}{}, map[string]struct{}{}, map[string]struct{}{}, map[string]struct{}{}
	var reward, resp Stats
	var routing Routing
	var key []byte
	err = r.ForEach(ctx, func(rec arrow.Record) error {
		file, first, _ := r.Pos()
		if err := schema.Validate(file, first, rec, schema.ValidateOptions{AllowInvalidReward: true}); err != nil {
			return err
		}
		sum.Rows += rec.NumRows()
		b, t, ru, st := get(rec, schema.Batch), get(rec, schema.Task), get(rec, schema.Run), get(rec, schema.Step)
		rw, _ := get(rec, schema.Reward).(*array.Float64)
		ll, _ := get(rec, lenCol).(array.ListLike)
		routed := get(rec, schema.RoutedExperts)
		status, _ := get(rec, schema.TruncateStatus).(*array.String)
		for i := 0; i < int(rec.NumRows()); i++ {
			if schema.RoutingData(routed, status, i) {
				routing.Rows++
			} else if routed != nil && !routed.IsNull(i) {
				routing.Placeholders++
			}
			if b != nil && t != nil {
				key = schema.AppendKey(key[:0], i, b)
				batches[string(key)] = struct{}{}
				key = schema.AppendKey(key[:0], i, b, t)
				tasks[string(key)] = struct{}{}
				if ru != nil {
					key = schema.AppendKey(key[:0], i, b, t, ru)
					runs[string(key)] = struct{}{}
				}
			}
			if st != nil {
				key = schema.AppendID(key[:0], st, i)
				steps[string(key)] = struct{}{}
			}
			if rw != nil {
				if rw.IsNull(i) {
					reward.Invalid++
				} else {
					reward.Add(rw.Value(i))
				}
			}
			if ll != nil && !ll.IsNull(i) {
				lo, hi := ll.ValueOffsets(i)
				resp.Add(float64(hi - lo))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sum.Warnings = r.Warnings()
	sum.Batches, sum.Tasks, sum.Runs, sum.Steps = len(batches), len(tasks), len(runs), len(steps)
	if len(sc.FieldIndices(schema.Reward)) > 0 {
		sum.Reward = &reward
	}
	if lenCol != "" {
		sum.Response = &resp
	}
	if len(sc.FieldIndices(schema.RoutedExperts)) > 0 {
		sum.Routing = &routing
	}
	return sum, nil
}

// bufferLayout describes the layout a Trinity-RFT buffer's reader found
// (recorded in the schema's metadata); "" for other stores.
func bufferLayout(sc *arrow.Schema) string {
	md := sc.Metadata()
	li, ki := md.FindKey(trinity.MetaLayout), md.FindKey(trinity.MetaSchemaType)
	if li < 0 || ki < 0 {
		return ""
	}
	what := map[trinity.Layout]string{
		trinity.Layout05:    "one table, payload in experience_bytes",
		trinity.Layout06:    "metadata table + <table>_blob",
		trinity.LayoutMixed: "mixed: 0.5 rows with inline payloads + 0.6 rows in <table>_blob",
	}[trinity.Layout(md.Values()[li])]
	return fmt.Sprintf("Trinity-RFT %s layout (%s), schema_type %s", md.Values()[li], what, md.Values()[ki])
}

// WriteJSON writes the summary as indented JSON; < > & are written as
// they are (column types hold them: list<item: float>).
func (s *Summary) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}

// WriteTable writes the summary as an aligned two-column table.
func (s *Summary) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "store\t%s (%d file(s))\n", s.Store, s.Files)
	if s.Buffer != "" {
		fmt.Fprintf(tw, "buffer\t%s\n", s.Buffer)
	}
	for _, w := range s.Warnings {
		fmt.Fprintf(tw, "warning\t%s\n", w)
	}
	fmt.Fprintf(tw, "rows\t%d\n", s.Rows)
	fmt.Fprintf(tw, "batches / tasks / runs / steps\t%d / %d / %d / %d\n", s.Batches, s.Tasks, s.Runs, s.Steps)
	if r := s.Reward; r != nil {
		fmt.Fprintf(tw, "reward\tmean %.4g  std %.4g  min %.4g  max %.4g  (%d invalid: null, NaN or infinite, left out)\n", r.Mean, r.Std, r.Min, r.Max, r.Invalid)
	}
	if r := s.Response; r != nil {
		fmt.Fprintf(tw, "response length\tmean %.1f  min %.0f  max %.0f\n", r.Mean, r.Min, r.Max)
	}
	if r := s.Routing; r != nil {
		fmt.Fprintf(tw, "routed_experts\t%d rows of routing data, %d prompt_truncated placeholders (not routing data)\n", r.Rows, r.Placeholders)
	}
	fmt.Fprintln(tw, "columns\t")
	for _, c := range s.Columns {
		fmt.Fprintf(tw, "  %s\t%s\n", c.Name, c.Type)
	}
	return tw.Flush()
}
