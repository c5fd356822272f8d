package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/table"
	rsql "github.com/rftpipe/rftpipe/sql"
	"github.com/rftpipe/rftpipe/sql/duckdb"
)

// values runs a query returning one row and returns its values.
func (b *builder) values(q string, n int) ([]any, error) {
	vals := make([]any, n)
	ptrs := make([]any, n)
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	return vals, b.row(q, ptrs...)
}

// summary runs a canned analysis and reduces its rows (those matching the
// condition where, if any) with the select list expr, returning one row of n
// values.
func (b *builder) summary(name string, vars map[string]string, expr, where string, n int) ([]any, error) {
	a, err := rsql.LookupAnalysis(name)
	if err != nil {
		return nil, err
	}
	aq, err := duckdb.PrepareAnalysis(b.ctx, b.db, a, vars)
	if err != nil {
		return nil, err
	}
	q := "SELECT " + expr + " FROM (\n" + aq + "\n)"
	if where != "" {
		q += " WHERE " + where
	}
	return b.values(q, n)
}

// numbers fills the key-number table, one group of numbers after another;
// a group whose columns the store lacks is left out.
func (b *builder) numbers(p *page) error {
	groups := []func(*page) error{b.storeNumbers, b.rewardNumbers, b.groupNumbers, b.responseNumbers,
		b.advantageNumbers, b.duplicationNumbers, b.dropNumbers, b.experimentNumbers}
	for _, group := range groups {
		if err := group(p); err != nil {
			return err
		}
	}
	return nil
}

// storeNumbers adds the store's size: its rows, and the batches, tasks,
// runs, steps and model versions of the columns it has.
func (b *builder) storeNumbers(p *page) error {
	exprs := []string{"count(*)"}
	labels := []string{"experiences (rows)"}
	add := func(cols []string, expr, label string) {
		if b.has(cols...) {
			exprs = append(exprs, expr)
			labels = append(labels, label)
		}
	}
	add([]string{schema.Batch}, "count(DISTINCT batch)", "explore batches")
	key := rsql.GroupKey(b.cols)
	add([]string{schema.Batch, schema.Task}, "count(DISTINCT ("+key+"))", "tasks (groups, tid = batch/task)")
	add([]string{schema.Batch, schema.Task, schema.Run}, "count(DISTINCT ("+key+", run))", "runs (batch/task/run)")
	add([]string{schema.Step}, "count(DISTINCT step)", "distinct steps")
	add([]string{schema.ModelVersion}, "min(model_version)::VARCHAR || ' – ' || max(model_version)::VARCHAR", "model versions")
	vals, err := b.values("SELECT "+strings.Join(exprs, ", ")+" FROM experiences", len(exprs))
	if err != nil {
		return err
	}
	p.Rows = int64(num(vals[0]))
	g := numberGroup{Title: "Store"}
	g.add("store", p.Store, fmt.Sprintf("%d file(s)", p.Files))
	for i, l := range labels {
		g.add(l, text(vals[i]), "")
	}
	p.Numbers = append(p.Numbers, g)
	return nil
}

// rewardNumbers adds the statistics of the finite rewards and, where runs
// and steps are known, mean@k and pass@k.
func (b *builder) rewardNumbers(p *page) error {
	if !b.has(schema.Reward) {
		return nil
	}
	v, err := b.values(`SELECT count(*) FILTER (WHERE isfinite(reward)), avg(reward) FILTER (WHERE isfinite(reward)),
		stddev_samp(reward) FILTER (WHERE isfinite(reward)), min(reward) FILTER (WHERE isfinite(reward)),
		max(reward) FILTER (WHERE isfinite(reward)), count(*) FILTER (WHERE reward IS NULL OR NOT isfinite(reward))
		FROM experiences`, 6)
	if err != nil {
		return err
	}
	g := numberGroup{Title: "Rewards"}
	g.add("reward mean ± std", fmt.Sprintf("%s ± %s", fnum(num(v[1])), fnum(num(v[2]))), fmt.Sprintf("over %s finite rewards", fint(num(v[0]))))
	g.add("reward min / max", fmt.Sprintf("%s / %s", fnum(num(v[3])), fnum(num(v[4]))), "")
	g.add("null, NaN or infinite rewards", fint(num(v[5])), "left out of every reward statistic")
	if b.has(schema.Batch, schema.Task, schema.Run, schema.Step) {
		if err := b.passAtK(&g); err != nil {
			return err
		}
	}
	p.Numbers = append(p.Numbers, g)
	return nil
}

// passAtK adds mean@k and pass@k over tasks (analysis pass_at_k) to g.
func (b *builder) passAtK(g *numberGroup) error {
	s, err := b.summary("pass_at_k", nil, "avg(mean_at_k), avg(pass_at_k), min(k), max(k)", "", 4)
	if err != nil {
		return err
	}
	k := text(s[2])
	if s[2] != s[3] {
		k = text(s[2]) + "–" + text(s[3])
	}
	g.add("mean@k over tasks", fnum(num(s[0])), "k = runs per task ("+k+"); the last step's reward scores a run")
	g.add("pass@k over tasks", fnum(num(s[1])), "a run passes with reward ≥ 1 (analysis pass_at_k)")
	return nil
}

// groupNumbers adds the GRPO groups and those std_threshold drops
// (analysis group_filter), and keeps the analysis' row for the plots.
func (b *builder) groupNumbers(p *page) error {
	if !b.has(schema.Batch, schema.Task, schema.Reward) {
		return nil
	}
	rows, err := b.analysis("group_filter", map[string]string{"std_threshold": strconv.FormatFloat(b.o.StdThreshold, 'g', -1, 64)})
	if err != nil {
		return err
	}
	r := rows[0]
	b.groups = r
	g := numberGroup{Title: "Groups (GRPO)"}
	g.add("groups", fint(num(r["groups"])), "")
	g.add("singleton groups", fint(num(r["singleton_groups"])), "any std_threshold drops them")
	g.add("zero-variance groups", fmt.Sprintf("%s (%s)", fint(num(r["zero_variance_groups"])), fpct(num(r["zero_variance_share"]))), "all rewards equal: zero advantage")
	g.add(fmt.Sprintf("dropped at std_threshold = %g", b.o.StdThreshold),
		fmt.Sprintf("%s groups (%s), %s rows (%s)", fint(num(r["dropped_groups"])), fpct(num(r["dropped_group_share"])),
			fint(num(r["dropped_rows"])), fpct(num(r["dropped_row_share"]))), "std ≤ threshold or singleton (analysis group_filter)")
	p.Numbers = append(p.Numbers, g)
	return nil
}

// responseNumbers adds the response lengths' statistics and, where
// truncate_status is known, the truncated shares (keeping the response
// one for the plots).
func (b *builder) responseNumbers(p *page) error {
	if !b.has("response_length") {
		return nil
	}
	v, err := b.values(`SELECT avg(response_length), min(response_length), quantile_disc(response_length, 0.5),
		quantile_disc(response_length, 0.95), max(response_length) FROM experiences`, 5)
	if err != nil {
		return err
	}
	g := numberGroup{Title: "Responses"}
	g.add("response length mean", fnum(num(v[0]))+" tokens", "measured as len("+b.lenSrc+")")
	g.add("min / p50 / p95 / max", fmt.Sprintf("%s / %s / %s / %s tokens", text(v[1]), text(v[2]), text(v[3]), text(v[4])), "")
	if b.has(schema.TruncateStatus) {
		t, err := b.values(`SELECT count(*) FILTER (WHERE truncate_status = 'response_truncated') / count(*),
			count(*) FILTER (WHERE truncate_status = 'prompt_truncated') / count(*) FROM experiences`, 2)
		if err != nil {
			return err
		}
		b.truncated = num(t[0])
		g.add("response truncated", fpct(num(t[0])), "truncate_status = response_truncated")
		g.add("prompt truncated", fpct(num(t[1])), "truncate_status = prompt_truncated")
	}
	p.Numbers = append(p.Numbers, g)
	return nil
}

// advantageNumbers adds the per-row advantages' statistics.
func (b *builder) advantageNumbers(p *page) error {
	if !b.has("advantage") {
		return nil
	}
	v, err := b.values(`SELECT count(advantage), avg(advantage), stddev_samp(advantage), min(advantage), max(advantage),
		count(*) FILTER (WHERE advantage = 0) / count(advantage) FROM experiences`, 6)
	if err != nil {
		return err
	}
	g := numberGroup{Title: "Advantages"}
	g.add("rows with advantages", fint(num(v[0])), "per row: the mean over its action-mask tokens")
	g.add("advantage mean ± std", fmt.Sprintf("%s ± %s", fnum(num(v[1])), fnum(num(v[2]))), "")
	g.add("advantage min / max", fmt.Sprintf("%s / %s", fnum(num(v[3])), fnum(num(v[4]))), "")
	g.add("zero advantage", fpct(num(v[5])), "no learning signal")
	p.Numbers = append(p.Numbers, g)
	return nil
}

// duplicationNumbers adds the duplicated rows and the groups holding them
// (analysis duplicates), and keeps the latter for the plots.
func (b *builder) duplicationNumbers(p *page) error {
	if !b.has(schema.Batch, schema.Task, schema.DuplicateOf) {
		return nil
	}
	v, err := b.summary("duplicates", nil, "duplicated_rows, duplicated_share, duplicated_groups, groups", "batch = 'all'", 4)
	if err != nil {
		return err
	}
	b.dupGroups = int64(num(v[2]))
	g := numberGroup{Title: "Duplication"}
	g.add("duplicated rows", fmt.Sprintf("%s (%s)", fint(num(v[0])), fpct(num(v[1]))), "duplicate_of set (analysis duplicates)")
	g.add("groups holding duplicated rows", fmt.Sprintf("%s of %s", fint(num(v[2])), fint(num(v[3]))), "")
	p.Numbers = append(p.Numbers, g)
	return nil
}

// dropNumbers adds, for a run's rejected-rows store, the dropped rows per
// reason and stage (analysis drop_reasons).
func (b *builder) dropNumbers(p *page) error {
	if !b.has(schema.Batch, schema.Task, schema.Reward, dropReason, droppedBy) {
		return nil
	}
	rows, err := b.analysis("drop_reasons", nil)
	if err != nil {
		return err
	}
	g := numberGroup{Title: "Dropped rows (a run's --rejected store)"}
	for _, r := range rows {
		if fmt.Sprint(r["batch"]) != "all" {
			continue
		}
		g.add(fmt.Sprintf("%v (%v)", r["drop_reason"], r["dropped_by"]), fint(num(r["rows"])),
			fmt.Sprintf("reward mean %s, min %s, max %s (analysis drop_reasons)", fnum(num(r["reward_mean"])), fnum(num(r["reward_min"])), fnum(num(r["reward_max"]))))
	}
	p.Numbers = append(p.Numbers, g)
	return nil
}

// experimentColumn is a column of the per-experiment table: the
// aggregates exprs over an experiment's rows, rendered by format.
type experimentColumn struct {
	label  string
	needs  []string // the columns of experiences exprs read
	exprs  []string
	format func(v []any) string
}

// experimentColumns are the per-experiment table's columns after the
// experiment's name, computed as the key numbers and plots of the page
// compute them; those whose columns the store lacks are left out.
var experimentColumns = []experimentColumn{
	{"rows", nil, []string{"count(*)"}, func(v []any) string { return fint(num(v[0])) }},
	{"explore batches", []string{schema.Batch}, []string{"count(DISTINCT batch)"}, func(v []any) string { return fint(num(v[0])) }},
	{"model versions", []string{schema.ModelVersion}, []string{"min(model_version)", "max(model_version)"},
		func(v []any) string { return text(v[0]) + " – " + text(v[1]) }},
	{"reward mean ± std", []string{schema.Reward}, []string{meanReward, "stddev_samp(reward) FILTER (WHERE isfinite(reward))"},
		func(v []any) string { return fnum(num(v[0])) + " ± " + fnum(num(v[1])) }},
	{"null, NaN or infinite rewards", []string{schema.Reward}, []string{"count(*) FILTER (WHERE reward IS NULL OR NOT isfinite(reward))"},
		func(v []any) string { return fint(num(v[0])) }},
	{"filtered rows", []string{dropReason}, []string{"count(drop_reason) / count(*)"}, func(v []any) string { return fpct(num(v[0])) }},
	{"response length mean", []string{"response_length"}, []string{"avg(response_length)"}, func(v []any) string { return fnum(num(v[0])) }},
	{"entropy mean", []string{"entropy_sum", "entropy_tokens"}, []string{"sum(entropy_sum) / nullif(sum(entropy_tokens), 0)"},
		func(v []any) string { return fnum(num(v[0])) }},
	{"advantage mean", []string{"advantage"}, []string{"avg(advantage)"}, func(v []any) string { return fnum(num(v[0])) }},
}

// experimentNumbers adds, when the store holds several experiments, the
// table of each one's key numbers (experimentColumns).
func (b *builder) experimentNumbers(p *page) error {
	if len(b.experiments) < 2 {
		return nil
	}
	t := &comparison{Header: []string{"experiment"}}
	var cols []experimentColumn
	exprs := []string{duckdb.QuoteIdent(experiment) + "::VARCHAR AS e"}
	for _, c := range experimentColumns {
		if b.has(c.needs...) {
			cols = append(cols, c)
			t.Header = append(t.Header, c.label)
			exprs = append(exprs, c.exprs...)
		}
	}
	q := "SELECT " + strings.Join(exprs, ", ") + " FROM experiences WHERE e IS NOT NULL GROUP BY e ORDER BY e"
	rows, err := b.db.QueryContext(b.ctx, q)
	if err != nil {
		return fmt.Errorf("report: %w\n%s", err, q)
	}
	defer rows.Close()
	for rows.Next() {
		vals := make([]any, len(exprs))
		ptrs := make([]any, len(exprs))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		row := []string{text(vals[0])}
		k := 1
		for _, c := range cols {
			row = append(row, c.format(vals[k:k+len(c.exprs)]))
			k += len(c.exprs)
		}
		t.Rows = append(t.Rows, row)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	p.Experiments = t
	return nil
}

// The columns of a rejected-rows store (rftpipe run --rejected).
const (
	dropReason = schema.DropReason
	droppedBy  = schema.DroppedBy
	experiment = table.ExperimentColumn
)

// rewardSections adds the reward histogram and the mean reward per batch.
func (b *builder) rewardSections(p *page) error {
	if !b.has(schema.Reward) {
		p.note(SecReward, "Reward distribution", "The store has no reward column (DPO stores carry none).")
		p.note(SecRewardByBatch, "Mean reward per explore batch", "The store has no reward column.")
		return nil
	}
	h, err := b.hist("SELECT reward AS x FROM experiences", b.o.Bins, math.NaN(), true)
	if err != nil {
		return err
	}
	if h.N == 0 {
		p.note(SecReward, "Reward distribution", "No finite rewards.")
		p.note(SecRewardByBatch, "Mean reward per explore batch", "No finite rewards.")
		return nil
	}
	img, err := pngURL(histogramPlot(h, "Reward distribution", "reward (reward units)", "experiences"))
	if err != nil {
		return err
	}
	p.image(SecReward, "Reward distribution", fmt.Sprintf("%s finite rewards between %s and %s.", fint(float64(h.N)), fnum(h.Min), fnum(h.Max)), img)

	if !b.has(schema.Batch) {
		p.note(SecRewardByBatch, "Mean reward per explore batch", "The store has no batch column.")
		return nil
	}
	series, ordinal, err := b.perBatch(meanReward)
	if err != nil {
		return err
	}
	var bp *plot.Plot
	caption := fmt.Sprintf("%d batches; one point per batch, in batch order.", len(series[0].xs))
	if len(series) > 1 {
		bp, err = linesPlot("Mean reward per explore batch, per experiment", "mean reward (reward units)", batchLabel(ordinal), series)
		caption = fmt.Sprintf("%d experiments, one line each; one point per batch, in batch order.", len(series))
	} else {
		var overall float64
		if err := b.row("SELECT avg(reward) FROM experiences WHERE isfinite(reward)", &overall); err != nil {
			return err
		}
		bp, err = batchPlot(series[0].xs, series[0].ys, overall, batchLabel(ordinal))
	}
	if err != nil {
		return err
	}
	if img, err = pngURL(bp); err != nil {
		return err
	}
	p.image(SecRewardByBatch, "Mean reward per explore batch", caption, img)
	return nil
}

// batchLabel is the x axis label of a per-batch plot; ordinal: the batch
// ids are not integers (perBatch).
func batchLabel(ordinal bool) string {
	if ordinal {
		return "explore batch (position in batch order)"
	}
	return "explore step (batch id)"
}

// stepSeries is a value per explore batch of one experiment.
type stepSeries struct {
	experiment string
	xs, ys     []float64
}

// meanReward is the mean finite reward of a batch, perBatch's expression.
const meanReward = "avg(reward) FILTER (WHERE isfinite(reward))"

// perBatch returns the aggregate expression y over each batch's rows, one
// series per experiment when the store's experiment column holds more than
// one (an experience table), else one series; batches where y is null are
// left out. ordinal: the batch ids are not integers, so xs are the
// batches' positions in batch order.
func (b *builder) perBatch(y string) (series []stepSeries, ordinal bool, err error) {
	exp := "''"
	if b.has(experiment) {
		exp = duckdb.QuoteIdent(experiment)
	}
	rows, err := b.db.QueryContext(b.ctx, `SELECT `+exp+`, batch, `+y+` AS y
		FROM experiences GROUP BY ALL HAVING y IS NOT NULL ORDER BY 1, 2`)
	if err != nil {
		return nil, false, fmt.Errorf("report: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var batch any
		var mean float64
		if err := rows.Scan(&name, &batch, &mean); err != nil {
			return nil, false, err
		}
		if len(series) == 0 || series[len(series)-1].experiment != name {
			series = append(series, stepSeries{experiment: name})
		}
		s := &series[len(series)-1]
		x, ok := batch.(int64)
		if !ok {
			ordinal = true
		}
		s.xs, s.ys = append(s.xs, float64(x)), append(s.ys, mean)
	}
	if err := rows.Err(); err != nil {
		return nil, false, err
	}
	if ordinal {
		for _, s := range series {
			for i := range s.xs {
				s.xs[i] = float64(i)
			}
		}
	}
	return series, ordinal, nil
}

// experimentPlot is one of the plots a page of several experiments adds:
// the expression y over each batch, per experiment.
type experimentPlot struct {
	id, title, yLabel string
	y                 string   // the aggregate perBatch computes
	needs             []string // the columns of experiences y reads
	missing           string   // the note when the store lacks them
	caption           string
}

// experimentPlots are the per-batch comparisons of a page of several
// experiments, in ExperimentSections' order.
var experimentPlots = []experimentPlot{
	{SecFilteredByBatch, "Filtered rows per explore batch", "filtered rows (%)",
		"100 * count(drop_reason) / count(*)", []string{dropReason},
		"The store has no drop_reason column (a run's --rejected rows carry it).",
		"Rows with a drop_reason over all rows of the batch, as the filtered_share analysis counts them."},
	{SecLengthByBatch, "Mean response length per explore batch", "mean response length (tokens)",
		"avg(response_length)", []string{"response_length"},
		"The store has no action_mask, logprobs, tokens or chosen column to measure responses on.",
		"Response lengths measured as in the Response length section."},
	{SecEntropyByBatch, "Mean entropy per explore batch", "mean token entropy (nats)",
		"sum(entropy_sum) / nullif(sum(entropy_tokens), 0)", []string{"entropy_sum", "entropy_tokens"},
		"The store has no entropy or action_mask column.",
		"The mean entropy of the response tokens whose action_mask is set, as the entropy_drift analysis computes it."},
	{SecAdvantageByBatch, "Mean advantage per explore batch", "mean advantage (unitless)",
		"avg(advantage)", []string{"advantage"},
		"The store has no advantages column: compute them with rftpipe run, then report on its output.",
		"A row's advantage is the mean over its action-mask tokens; rows without advantages are left out."},
}

// experimentSections adds, when the store holds several experiments, the
// per-experiment summary table and the per-batch comparisons, one line per
// experiment.
func (b *builder) experimentSections(p *page) error {
	if len(b.experiments) < 2 || !b.has(schema.Batch) {
		return nil
	}
	for _, e := range experimentPlots {
		if !b.has(e.needs...) {
			p.note(e.id, e.title, e.missing)
			continue
		}
		series, ordinal, err := b.perBatch(e.y)
		if err != nil {
			return err
		}
		if len(series) == 0 {
			p.note(e.id, e.title, "No batch has a value.")
			continue
		}
		lp, err := linesPlot(e.title+", per experiment", e.yLabel, batchLabel(ordinal), series)
		if err != nil {
			return err
		}
		img, err := pngURL(lp)
		if err != nil {
			return err
		}
		p.image(e.id, e.title, fmt.Sprintf("%d experiments, one line each; one point per batch. %s", len(series), e.caption), img)
	}
	return nil
}

// groupSections adds the group std histogram and the filtered/duplicated shares.
func (b *builder) groupSections(p *page) error {
	if b.groups == nil {
		p.note(SecGroupStd, "Reward std per group", "Needs the batch, task and reward columns.")
		p.note(SecGroups, "Share of groups filtered or duplicated", "Needs the batch, task and reward columns.")
		return nil
	}
	thr := b.o.StdThreshold
	h, err := b.hist("SELECT x FROM ("+b.groupStdQuery()+") WHERE n > 1 AND x > 0", b.o.Bins, 0, false)
	if err != nil {
		return err
	}
	r := b.groups
	img, err := pngURL(stdPlot(h, int64(num(r["zero_variance_groups"])), thr))
	if err != nil {
		return err
	}
	within := ""
	if b.has(experiment) {
		within = " within each experiment"
	}
	caption := fmt.Sprintf("Groups are tid = batch/task%s, as GRPO groups them (std of the float32 rewards, unbiased). "+
		"GRPO with std_threshold = %g drops the groups left of the red line and every singleton group (%s here): %s of %s groups.",
		within, thr, fint(num(r["singleton_groups"])), fint(num(r["dropped_groups"])), fint(num(r["groups"])))
	if n := num(r["invalid_rewards"]); n > 0 {
		caption += fmt.Sprintf(" %s rows with a null, NaN or infinite reward are left out, as run --on-invalid-reward drop leaves them out.", fint(n))
	}
	p.image(SecGroupStd, "Reward std per group", caption, img)

	groups := int64(num(r["groups"]))
	shares := []share{
		{"all rewards equal (std = 0)", int64(num(r["zero_variance_groups"])), groups, colOrange},
		{"singleton (one row)", int64(num(r["singleton_groups"])), groups, colGrey},
		{fmt.Sprintf("dropped at std_threshold = %g", thr), int64(num(r["dropped_groups"])), groups, colRed},
		{"kept", groups - int64(num(r["dropped_groups"])), groups, colBlue},
	}
	caption = "Shares of all groups. The store has no duplicate_of column, so nothing was duplicated (rftpipe run with duplicate_experiences writes it)."
	if b.has(schema.DuplicateOf) {
		shares = append(shares, share{"holding duplicated rows", b.dupGroups, groups, colGreen})
		caption = "Shares of all groups; duplicated rows are those with duplicate_of set."
	}
	sp, err := sharesPlot(shares)
	if err != nil {
		return err
	}
	if img, err = pngURL(sp); err != nil {
		return err
	}
	p.image(SecGroups, "Share of groups filtered or duplicated", caption, img)
	return nil
}

// groupStdQuery selects each group's size n and the unbiased std x of its
// finite rewards as float32, the groups keyed by rsql.GroupKey.
func (b *builder) groupStdQuery() string {
	return "SELECT stddev_samp(reward::FLOAT) AS x, count(*) AS n FROM experiences WHERE isfinite(reward) GROUP BY " + rsql.GroupKey(b.cols)
}

// lengthSection adds the response-length histogram.
func (b *builder) lengthSection(p *page) error {
	const title = "Response length"
	if !b.has("response_length") {
		p.note(SecLength, title, "The store has no action_mask, logprobs, tokens or chosen column to measure responses on.")
		return nil
	}
	h, err := b.hist("SELECT response_length AS x FROM experiences", b.o.Bins, math.NaN(), true)
	if err != nil {
		return err
	}
	if h.N == 0 {
		p.note(SecLength, title, "No response lengths.")
		return nil
	}
	img, err := pngURL(histogramPlot(h, "Response length", "response length (tokens)", "experiences"))
	if err != nil {
		return err
	}
	caption := fmt.Sprintf("Measured as len(%s); %s to %s tokens.", b.lenSrc, fint(h.Min), fint(h.Max))
	if h.Min == h.Max {
		caption = fmt.Sprintf("Measured as len(%s); every response has %s tokens.", b.lenSrc, fint(h.Min))
	}
	if b.has(schema.TruncateStatus) {
		caption += fmt.Sprintf(" %s of the responses were truncated at the generation limit.", fpct(b.truncated))
	}
	p.image(SecLength, title, caption, img)
	return nil
}

// advantageSection adds the advantage histogram, when the store has advantages.
func (b *builder) advantageSection(p *page) error {
	const title = "Advantages"
	if !b.has("advantage") {
		p.note(SecAdvantages, title, "The store has no advantages column: compute them with rftpipe run, then report on its output.")
		return nil
	}
	h, err := b.hist("SELECT advantage AS x FROM experiences", b.o.Bins, math.NaN(), false)
	if err != nil {
		return err
	}
	if h.N == 0 {
		p.note(SecAdvantages, title, "No row has advantages.")
		return nil
	}
	img, err := pngURL(histogramPlot(h, "Advantage per experience", "advantage (mean over action-mask tokens, unitless)", "experiences"))
	if err != nil {
		return err
	}
	p.image(SecAdvantages, title, fmt.Sprintf("%s rows with advantages, between %s and %s. Zero-variance groups give a zero advantage.",
		fint(float64(h.N)), fnum(h.Min), fnum(h.Max)), img)
	return nil
}
