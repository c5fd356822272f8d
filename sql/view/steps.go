package view

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/rftpipe/rftpipe/schema"
)

// Sort columns of the steps and groups tables.
var (
	stepSorts  = []string{"batch", "groups", "rollouts", "reward_mean", "reward_std", "adv_mean", "entropy_mean", "length_mean", "dropped_groups", "experiment"}
	groupSorts = []string{"task", "rollouts", "dropped", "reward_mean", "reward_std", "adv_mean", "adv_min", "adv_max", "length_mean", "status", "experiment"}
	statuses   = []string{"kept", "dropped", "partly dropped"}
)

// pager is a paged table's position: the rows shown and links to the
// neighbouring pages (empty at the ends).
type pager struct {
	Page       int64
	First      int64 // 1-based number of the first row shown
	Last       int64
	Prev, Next string
}

// newPager returns the pager of page (1-based) showing n rows, more telling
// whether rows follow; link makes the URL of another page.
func newPager(page int64, n int, more bool, link func(page int64) string) pager {
	p := pager{Page: page, First: (page-1)*pageSize + 1, Last: (page-1)*pageSize + int64(n)}
	if n == 0 {
		p.First = 0
	}
	if page > 1 {
		p.Prev = link(page - 1)
	}
	if more {
		p.Next = link(page + 1)
	}
	return p
}

// sortLinks returns, per sortable column, the URL sorting by it: the other
// direction for the column sorted by, else descending.
func sortLinks(base string, q url.Values, cols []string, col, dir string) map[string]string {
	out := map[string]string{}
	for _, c := range cols {
		v := url.Values{}
		for k, vs := range q {
			v[k] = vs
		}
		v.Del("page")
		v.Set("sort", c)
		d := "desc"
		if c == col && dir == "desc" {
			d = "asc"
		}
		v.Set("dir", d)
		out[c] = base + "?" + v.Encode()
	}
	return out
}

// pageLink returns the URL of page n of base with the query q.
func pageLink(base string, q url.Values) func(int64) string {
	return func(n int64) string {
		v := url.Values{}
		for k, vs := range q {
			v[k] = vs
		}
		v.Set("page", strconv.FormatInt(n, 10))
		return base + "?" + v.Encode()
	}
}

// overviewData is the overview page.
type overviewData struct {
	Numbers    record
	Reasons    []record
	ExpTable   table    // the experiments, when there are several
	Entropy    bool     // the store has per-token entropy: the steps' mean is shown
	Experiment string   // the experiment the steps table shows ("": all)
	Curves     []record // every step of every experiment: the plots' data
	Steps      []record // this page of the steps table
	Pager      pager
	Sort       string
	Dir        string
	Sorts      map[string]string
}

// overview shows the key numbers, the curves per step and the steps table.
func (v *Viewer) overview(w http.ResponseWriter, r *http.Request) error {
	p, err := parseParams(r, "experiment", "page", "sort", "dir")
	if err != nil {
		return err
	}
	exp, err := v.experiment(p, false)
	if err != nil {
		return err
	}
	page, err := p.page()
	if err != nil {
		return err
	}
	col, dir, order, err := p.sorting(stepSorts, "batch", "asc", "batch_num, batch, experiment")
	if err != nil {
		return err
	}
	ctx := r.Context()
	d := overviewData{ExpTable: v.expTable, Entropy: v.sources[0].has(schema.Entropy), Experiment: exp, Sort: col, Dir: dir, Sorts: sortLinks("/", p.q, stepSorts, col, dir)}
	nums, err := v.records(ctx, "SELECT * FROM summary")
	if err != nil {
		return err
	}
	d.Numbers = nums[0]
	if d.Reasons, err = v.records(ctx, "SELECT * FROM reasons ORDER BY rows DESC, drop_reason, dropped_by"); err != nil {
		return err
	}
	if d.Curves, err = v.records(ctx, query("steps_all", nil)); err != nil {
		return err
	}
	if d.Steps, err = v.records(ctx, query("steps_page", map[string]string{"order": order}), exp, exp, pageSize+1, (page-1)*pageSize); err != nil {
		return err
	}
	more := len(d.Steps) > pageSize
	d.Steps = d.Steps[:min(len(d.Steps), pageSize)]
	d.Pager = newPager(page, len(d.Steps), more, pageLink("/", p.q))
	return v.render(w, "overview", v.page("Overview", d))
}

// stepData is a step's page: its groups.
type stepData struct {
	Batch      string
	Experiment string   // the experiment the page shows ("": all)
	Steps      []record // the step of each experiment shown
	Groups     []record
	Status     string
	Reason     string
	Pager      pager
	Sort       string
	Dir        string
	Sorts      map[string]string
}

// step shows one explore step's groups, filtered and sorted as asked.
func (v *Viewer) step(w http.ResponseWriter, r *http.Request) error {
	p, err := parseParams(r, "batch", "experiment", "status", "reason", "page", "sort", "dir")
	if err != nil {
		return err
	}
	batch, err := p.key("batch")
	if err != nil {
		return err
	}
	exp, err := v.experiment(p, false)
	if err != nil {
		return err
	}
	status, err := p.oneOf("status", statuses, "")
	if err != nil {
		return err
	}
	page, err := p.page()
	if err != nil {
		return err
	}
	col, dir, order, err := p.sorting(groupSorts, "task", "asc", "task_num, task, experiment")
	if err != nil {
		return err
	}
	ctx := r.Context()
	steps, err := v.records(ctx, "SELECT * FROM steps WHERE batch = ? AND (? = '' OR experiment = ?) ORDER BY experiment", batch, exp, exp)
	if err != nil {
		return err
	}
	if len(steps) == 0 && exp != "" {
		return notFound("the experiment %q has no explore step (batch) %q", exp, batch)
	}
	if len(steps) == 0 {
		return notFound("the store has no explore step (batch) %q", batch)
	}
	d := stepData{Batch: batch, Experiment: exp, Steps: steps, Status: status, Reason: p.str("reason"), Sort: col, Dir: dir,
		Sorts: sortLinks("/step", p.q, groupSorts, col, dir)}
	d.Groups, err = v.records(ctx, query("groups_page", map[string]string{"order": order}),
		batch, exp, exp, status, status, d.Reason, d.Reason, d.Reason, pageSize+1, (page-1)*pageSize)
	if err != nil {
		return err
	}
	more := len(d.Groups) > pageSize
	d.Groups = d.Groups[:min(len(d.Groups), pageSize)]
	d.Pager = newPager(page, len(d.Groups), more, pageLink("/step", p.q))
	return v.render(w, "step", v.page("Step "+batch, d))
}
