// Package report renders an experience store as one self-contained HTML page:
// key numbers and plot data computed with DuckDB SQL (only scalar results
// cross into Go; list columns are reduced inside DuckDB with len(), list_avg()
// and friends), plots drawn with gonum.org/v1/plot and inlined as base64 PNG
// images.
//
// The store is read once: one DuckDB scan keeps the scalar columns and the
// per-row reductions of the list columns in a temp table named experiences,
// which the canned analyses (group_filter, pass_at_k, duplicates) and every
// later query read.
package report

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/objstore"
	"github.com/rftpipe/rftpipe/schema/store"
	rsql "github.com/rftpipe/rftpipe/sql"
	"github.com/rftpipe/rftpipe/sql/duckdb"
)

// Options configures a report.
type Options struct {
	Store        string  // the experience store: a file, a directory of Parquet files or a glob
	StdThreshold float64 // GRPO's std_threshold, marked on the group std histogram
	Bins         int     // bins per histogram (default 40)
	Threads      int     // DuckDB threads (0: one per CPU)
	MemoryLimit  string  // DuckDB memory limit (default: DuckDB's)
	TempDir      string  // DuckDB spill and conversion directory (default: the OS temp dir)
	// Cache, when its Dir is set, keeps local copies of a store in object
	// storage (duckdb.Store.Cache).
	Cache objstore.Cache
	// Progress, if set, is called as the work advances: done of total
	// steps (loading the store, then each group of sections).
	Progress func(done, total int)
	// Warn, if set, is called with each warning of the store's reader (a
	// Trinity buffer's orphan rows), which the page also shows as notes.
	Warn func(line string)
}

// Section ids of the page, in order; each is a <section id=…>.
const (
	SecNumbers       = "numbers"
	SecReward        = "reward"
	SecRewardByBatch = "reward-by-batch"
	SecGroupStd      = "group-std"
	SecGroups        = "groups"
	SecLength        = "response-length"
	SecAdvantages    = "advantages"

	// The sections a page of several experiments adds after
	// SecRewardByBatch: one line per experiment, one point per batch.
	SecFilteredByBatch  = "filtered-by-batch"
	SecLengthByBatch    = "length-by-batch"
	SecEntropyByBatch   = "entropy-by-batch"
	SecAdvantageByBatch = "advantage-by-batch"
)

// Sections lists the section ids in page order.
var Sections = []string{SecNumbers, SecReward, SecRewardByBatch, SecGroupStd, SecGroups, SecLength, SecAdvantages}

// ExperimentSections lists, in page order, the sections a page of several
// experiments has after SecRewardByBatch.
var ExperimentSections = []string{SecFilteredByBatch, SecLengthByBatch, SecEntropyByBatch, SecAdvantageByBatch}

// scalarColumns are the store columns the report keeps, when present.
var scalarColumns = []string{
	schema.Batch, schema.Task, schema.Run, schema.Step, schema.Reward,
	schema.ModelVersion, schema.TruncateStatus, schema.DuplicateOf, dropReason, droppedBy, experiment,
}

// Write renders the report of the store o.Store as HTML to w.
func Write(ctx context.Context, o Options, w io.Writer) error {
	if o.Bins <= 0 {
		o.Bins = 40
	}
	start := time.Now()
	var tmp string
	var err error
	if o.TempDir == "" {
		tmp, err = store.TempDir() // named so that a later run sweeps it if this one is killed
	} else {
		tmp, err = os.MkdirTemp(o.TempDir, "rftpipe-report-")
	}
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	db, err := duckdb.Open(duckdb.Options{Threads: o.Threads, MemoryLimit: o.MemoryLimit, TempDir: tmp})
	if err != nil {
		return err
	}
	defer db.Close()
	files, err := store.Expand(o.Store)
	if err != nil {
		return err
	}
	warnings, err := duckdb.Attach(ctx, db, []duckdb.Store{{Name: "store", Path: o.Store, Cache: o.Cache.OrNil()}}, tmp)
	if err != nil {
		return err
	}
	if o.Warn != nil {
		for _, w := range warnings {
			o.Warn(w)
		}
	}
	b := &builder{ctx: ctx, db: db, o: o}
	steps := []func(*page) error{b.numbers, b.rewardSections, b.experimentSections, b.groupSections, b.lengthSection, b.advantageSection}
	progress := func(done int) {
		if o.Progress != nil {
			o.Progress(done, len(steps)+1)
		}
	}
	if err := b.load(); err != nil {
		return duckdb.Located(ctx, err, o.Store)
	}
	progress(1)
	p := &page{Store: schema.Redact(o.Store), Files: len(files), Generated: start.UTC().Format("2006-01-02 15:04 MST"), Warnings: warnings}
	for i, step := range steps {
		if err := step(p); err != nil {
			return duckdb.Located(ctx, err, o.Store)
		}
		progress(i + 2)
	}
	p.Elapsed = time.Since(start).Round(10 * time.Millisecond).String()
	return p.render(w)
}

// builder runs the report's SQL.
type builder struct {
	ctx    context.Context
	db     *sql.DB
	o      Options
	cols   []string // columns of the temp table experiences
	lenSrc string   // what response_length was measured on
	// experiments are the names in the store's experiment column, sorted;
	// with more than one, the page compares them.
	experiments []string

	// Results the numbers pass keeps for the plots.
	groups    map[string]any // the group_filter row; nil without batch, task and reward
	dupGroups int64          // groups holding duplicated rows
	truncated float64        // share of response-truncated rows
}

func (b *builder) has(cols ...string) bool {
	for _, c := range cols {
		if !slices.Contains(b.cols, c) {
			return false
		}
	}
	return true
}

// load reads the store once into the temp table experiences: the scalar
// columns present, response_length, (after `rftpipe run`) the per-row
// advantage and, in a store of several experiments, the sum and count of
// the entropies of the masked response tokens.
func (b *builder) load() error {
	raw, err := duckdb.Columns(b.ctx, b.db, "store")
	if err != nil {
		return err
	}
	in := func(c string) bool { return slices.Contains(raw, c) }
	if in(experiment) {
		if b.experiments, err = b.list("SELECT DISTINCT " + duckdb.QuoteIdent(experiment) + "::VARCHAR AS e FROM store WHERE e IS NOT NULL ORDER BY e"); err != nil {
			return err
		}
	}
	var sel []string
	for _, c := range scalarColumns {
		if in(c) {
			sel = append(sel, duckdb.QuoteIdent(c))
		}
	}
	switch {
	case in(schema.ActionMask):
		sel, b.lenSrc = append(sel, "len(action_mask) AS response_length"), "action_mask"
	case in(schema.Logprobs):
		sel, b.lenSrc = append(sel, "len(logprobs) AS response_length"), "logprobs"
	case in(schema.Tokens) && in(schema.PromptLength):
		sel, b.lenSrc = append(sel, "len(tokens) - prompt_length AS response_length"), "tokens - prompt_length"
	case in(schema.Chosen):
		sel, b.lenSrc = append(sel, "len(chosen) AS response_length"), "chosen (DPO)"
	}
	switch {
	case in(schema.Advantages) && in(schema.ActionMask):
		// The row's advantage: the mean over its action-mask tokens, as in
		// the advantage_stats analysis. A dot product with the mask is 5×
		// faster than the per-token lambda, which only rows whose lists
		// differ in length (bad data) take. DuckDB's Parquet reader leaves
		// null entries in a list column's values under its null lists (rows
		// without advantages, as Trinity buffers have), which
		// list_dot_product refuses even where they are not read: such a
		// store gets its lists copied first.
		adv := "advantages"
		var nulls bool
		if err := b.row("SELECT coalesce(bool_or(advantages IS NULL), false) FROM store", &nulls); err != nil {
			return err
		}
		if nulls {
			adv = "list_transform(advantages, a -> a)"
		}
		sel = append(sel, `CASE WHEN len(advantages) = len(action_mask)
			THEN list_dot_product(`+adv+`, list_transform(action_mask, m -> m::FLOAT))
				/ nullif(list_sum(list_transform(action_mask, m -> m::FLOAT)), 0)
			ELSE list_avg(list_filter(list_transform(advantages, (a, i) -> CASE WHEN action_mask[i] THEN a END), a -> a IS NOT NULL))
			END AS advantage`)
	case in(schema.Advantages):
		sel = append(sel, "list_avg(advantages) AS advantage")
	}
	if len(b.experiments) > 1 && in(schema.Entropy) && in(schema.ActionMask) {
		// As the entropy_drift analysis: a token mean over the masked tokens.
		sel = append(sel, `list_sum(list_transform(range(1, len(entropy) + 1), i -> CASE WHEN action_mask[i] THEN entropy[i] ELSE 0 END)) AS entropy_sum`,
			`len(list_filter(action_mask, m -> m)) AS entropy_tokens`)
	}
	if len(sel) == 0 {
		return schema.Errorf(b.o.Store, -1, "", "nothing to report: the store has none of the columns %s, action_mask, logprobs, tokens, chosen, advantages",
			strings.Join(scalarColumns, ", "))
	}
	if err := b.exec("DROP VIEW " + duckdb.DefaultView); err != nil {
		return err
	}
	if err := b.exec("CREATE TEMP TABLE " + duckdb.DefaultView + " AS SELECT " + strings.Join(sel, ", ") + " FROM store"); err != nil {
		return err
	}
	b.cols, err = duckdb.Columns(b.ctx, b.db, duckdb.DefaultView)
	return err
}

func (b *builder) exec(q string) error {
	if _, err := b.db.ExecContext(b.ctx, q); err != nil {
		if b.ctx.Err() != nil {
			return b.ctx.Err()
		}
		return fmt.Errorf("report: %w\n%s", err, q)
	}
	return nil
}

// row runs a query that returns one row of scalars.
func (b *builder) row(q string, dest ...any) error {
	if err := b.db.QueryRowContext(b.ctx, q).Scan(dest...); err != nil {
		if b.ctx.Err() != nil {
			return b.ctx.Err()
		}
		return fmt.Errorf("report: %w\n%s", err, q)
	}
	return nil
}

// list runs a query whose rows are one string each and returns them.
func (b *builder) list(q string) ([]string, error) {
	rows, err := b.db.QueryContext(b.ctx, q)
	if err != nil {
		return nil, fmt.Errorf("report: %w\n%s", err, q)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// analysis runs a canned analysis with variables (SQL literals) and returns
// its rows as maps of column to value.
func (b *builder) analysis(name string, vars map[string]string) ([]map[string]any, error) {
	a, err := rsql.LookupAnalysis(name)
	if err != nil {
		return nil, err
	}
	q, err := duckdb.PrepareAnalysis(b.ctx, b.db, a, vars)
	if err != nil {
		return nil, err
	}
	rows, err := b.db.QueryContext(b.ctx, q)
	if err != nil {
		return nil, fmt.Errorf("report: analysis %s: %w", name, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []map[string]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		m := make(map[string]any, len(cols))
		for i, c := range cols {
			m[c] = vals[i]
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// histogram is binned data: Counts[i] values fell in [Lo+i*Width, Lo+(i+1)*Width).
type histogram struct {
	Lo, Width float64
	Counts    []int64
	N         int64
	Min, Max  float64
	Discrete  bool // integer data in integer-centred bins
}

// hist bins the finite values of column x of the query src into at most
// bins equal bins. With ints, integer data gets integer-centred bins of a
// whole width; lo, when not NaN, fixes the low edge (else the minimum).
func (b *builder) hist(src string, bins int, lo float64, ints bool) (histogram, error) {
	var h histogram
	vals := "SELECT x::DOUBLE AS x FROM (" + src + ") WHERE isfinite(x::DOUBLE)"
	var minV, maxV sql.NullFloat64
	var integral sql.NullBool
	if err := b.row("SELECT count(*), min(x), max(x), bool_and(x = round(x)) FROM ("+vals+")", &h.N, &minV, &maxV, &integral); err != nil {
		return h, err
	}
	if h.N == 0 {
		return h, nil
	}
	h.Min, h.Max = minV.Float64, maxV.Float64
	n := bins
	switch {
	case ints && integral.Bool && h.Max-h.Min < 1e6:
		h.Width = math.Max(1, math.Ceil((h.Max-h.Min+1)/float64(bins)))
		h.Lo = h.Min - 0.5
		n = int(math.Ceil((h.Max - h.Min + 1) / h.Width))
		h.Discrete = true
	case h.Max == h.Min:
		h.Lo, h.Width, n = h.Min-0.5, 1, 1
	default:
		h.Lo = h.Min
		if !math.IsNaN(lo) {
			h.Lo = math.Min(lo, h.Min)
		}
		h.Width = (h.Max - h.Lo) / float64(bins)
	}
	h.Counts = make([]int64, n)
	q := fmt.Sprintf("SELECT least(greatest(floor((x - %v) / %v), 0), %d)::BIGINT AS bin, count(*) FROM (%s) GROUP BY bin",
		h.Lo, h.Width, n-1, vals)
	rows, err := b.db.QueryContext(b.ctx, q)
	if err != nil {
		return h, fmt.Errorf("report: %w\n%s", err, q)
	}
	defer rows.Close()
	for rows.Next() {
		var bin, c int64
		if err := rows.Scan(&bin, &c); err != nil {
			return h, err
		}
		h.Counts[bin] = c
	}
	return h, rows.Err()
}

// num converts a scanned DuckDB number to float64 (NaN for NULL).
func num(v any) float64 {
	switch x := v.(type) {
	case int64:
		return float64(x)
	case int32:
		return float64(x)
	case float64:
		return x
	case float32:
		return float64(x)
	}
	return math.NaN()
}
