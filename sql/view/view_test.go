package view

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/sql/duckdb"
)

// hostile is the response text of rollout 0: markup that must reach the page
// as text.
const hostile = `<script>window.__xss = 1</script><img src=x onerror="window.__xss = 2"> & "quoted"`

// testStores writes a store of batches explore steps × 3 tasks × 4 runs and
// the rejected-rows store of a run over it: group (1, 2) dropped whole (all
// rewards equal), run 3 of group (2, 0) dropped by a length filter. Each
// row has Trinity's prompt_text and response_text, tokens (3 prompt tokens
// 100+task 101 102, response 7 8 9 run), logprobs, advantages and
// action_mask.
func testStores(t testing.TB, batches int) (storePath, rejectedPath string) {
	t.Helper()
	dir := t.TempDir()
	db, err := duckdb.Open(duckdb.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows := fmt.Sprintf(`SELECT b AS batch, t AS task, r::INTEGER AS run, 0::INTEGER AS step,
		CASE WHEN b = 1 AND t = 2 THEN 1.0 ELSE ((r + b * t) %% 2)::DOUBLE END AS reward,
		3::INTEGER AS prompt_length,
		[100 + t, 101, 102, 7, 8, 9, r]::INTEGER[] AS tokens,
		[-0.5, -0.25, -1.5 - r, -0.125]::FLOAT[] AS logprobs,
		[true, true, true, r <> 1]::BOOLEAN[] AS action_mask,
		list_transform(range(4), k -> (CASE WHEN (r + b * t) %% 2 = 1 THEN 0.5 ELSE -0.5 END)::FLOAT) AS advantages,
		'What is ' || t || ' + ' || b || '?' AS prompt_text,
		CASE WHEN b = 0 AND t = 0 AND r = 0 THEN %s ELSE 'answer ' || r || ' of task ' || t END AS response_text,
		CASE WHEN b = 1 AND t = 2 THEN 'reward_std_below_threshold' WHEN b = 2 AND t = 0 AND r = 3 THEN 'response_too_long' END AS drop_reason,
		CASE WHEN b = 1 AND t = 2 THEN 'grpo' WHEN b = 2 AND t = 0 AND r = 3 THEN 'length_filter' END AS dropped_by
		FROM range(%d) bs(b), range(3) ts(t), range(4) rs(r)`, duckdb.QuoteString(hostile), batches)
	storePath, rejectedPath = filepath.Join(dir, "store.parquet"), filepath.Join(dir, "rejected.parquet")
	for _, q := range []string{
		"COPY (SELECT * EXCLUDE (drop_reason, dropped_by) FROM (" + rows + ") WHERE drop_reason IS NULL ORDER BY batch, task, run) TO " + duckdb.QuoteString(storePath) + " (FORMAT parquet)",
		"COPY (SELECT * FROM (" + rows + ") WHERE drop_reason IS NOT NULL ORDER BY batch, task, run) TO " + duckdb.QuoteString(rejectedPath) + " (FORMAT parquet)",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	return storePath, rejectedPath
}

// newTestViewer opens a viewer over the test stores and serves it.
func newTestViewer(t testing.TB, batches int, allowSQL bool) (*Viewer, *httptest.Server) {
	t.Helper()
	s, rej := testStores(t, batches)
	return serveTestViewer(t, Options{Store: s, Rejected: rej, AllowSQL: allowSQL, Threads: 1})
}

// serveTestViewer opens a viewer with o, serves it and, unless o holds the
// index's second pass, waits for it.
func serveTestViewer(t testing.TB, o Options) (*Viewer, *httptest.Server) {
	t.Helper()
	v, err := Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(v)
	t.Cleanup(func() {
		srv.Close()
		v.Close()
	})
	if o.hold == nil {
		if err := v.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return v, srv
}

// get returns the status and body of GET url.
func get(t testing.TB, client *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := client.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// rowsOf returns the text of each <tr> of the table with the id, tags removed.
func rowsOf(body, id string) []string {
	i := strings.Index(body, `id="`+id+`"`)
	if i < 0 {
		return nil
	}
	body = body[i:]
	body = body[:strings.Index(body, "</table>")]
	tag := regexp.MustCompile(`<[^>]*>`)
	var out []string
	for _, tr := range strings.Split(body, "<tr")[1:] {
		out = append(out, strings.Join(strings.Fields(tag.ReplaceAllString("<tr"+tr, " ")), " "))
	}
	return out
}

func TestPages(t *testing.T) {
	_, srv := newTestViewer(t, 3, false)
	for _, c := range []struct {
		name, url string
		want      []string // in the body
		not       []string // not in the body
		rows      map[string][]string
	}{
		{name: "overview", url: "/", want: []string{
			`id="n-rollouts">36<`, `id="n-steps">3<`, `id="n-groups">9<`,
			`id="n-dropped-groups">2 (22.2%)`, `id="n-dropped">5 (13.9%)`,
			"<td>reward_std_below_threshold</td><td>grpo</td><td class=\"n\">4</td><td class=\"n\">1</td>",
			"<td>response_too_long</td><td>length_filter</td><td class=\"n\">1</td><td class=\"n\">1</td>",
		}, rows: map[string][]string{"steps-table": {
			"batch groups rollouts reward_mean reward_std adv_mean length_mean dropped_groups",
			"0 3 12 0.5 0.5222 0 4 0",
			"1 3 12 0.6667 0.4924 0 4 1",
			"2 3 12 0.5 0.5222 0 4 1",
		}}},
		{name: "steps sorted by dropped groups then batch", url: "/?sort=dropped_groups&dir=desc", rows: map[string][]string{"steps-table": {
			"batch groups rollouts reward_mean reward_std adv_mean length_mean dropped_groups",
			"1 3 12 0.6667 0.4924 0 4 1",
			"2 3 12 0.5 0.5222 0 4 1",
			"0 3 12 0.5 0.5222 0 4 0",
		}}},
		{name: "step", url: "/step?batch=1", rows: map[string][]string{"groups-table": {
			"task rollouts dropped reward_mean reward_std adv_mean adv_min adv_max length_mean status dropped_by drop_reason",
			"0 4 0 0.5 0.5774 0 -0.5 0.5 4 kept",
			"1 4 0 0.5 0.5774 0 -0.5 0.5 4 kept",
			"2 4 4 1 0 0 -0.5 0.5 4 dropped grpo reward_std_below_threshold",
		}}},
		{name: "step filtered by status", url: "/step?batch=2&status=partly+dropped", rows: map[string][]string{"groups-table": {
			"task rollouts dropped reward_mean reward_std adv_mean adv_min adv_max length_mean status dropped_by drop_reason",
			"0 4 1 0.5 0.5774 0 -0.5 0.5 4 partly dropped length_filter response_too_long",
		}}},
		{name: "step filtered by reason", url: "/step?batch=1&reason=std_below", rows: map[string][]string{"groups-table": {
			"task rollouts dropped reward_mean reward_std adv_mean adv_min adv_max length_mean status dropped_by drop_reason",
			"2 4 4 1 0 0 -0.5 0.5 4 dropped grpo reward_std_below_threshold",
		}}},
		{name: "step sorted by task, descending", url: "/step?batch=0&sort=task&dir=desc", want: []string{`class="sorted desc"><a href="/step?batch=0&amp;dir=asc&amp;sort=task"`}, rows: map[string][]string{"groups-table": {
			"task rollouts dropped reward_mean reward_std adv_mean adv_min adv_max length_mean status dropped_by drop_reason",
			"2 4 0 0.5 0.5774 0 -0.5 0.5 4 kept",
			"1 4 0 0.5 0.5774 0 -0.5 0.5 4 kept",
			"0 4 0 0.5 0.5774 0 -0.5 0.5 4 kept",
		}}},
		{name: "group with a dropped rollout", url: "/group?batch=2&task=0", want: []string{
			"partly dropped — response_too_long (length_filter)",
			`<article class="card dropped">`, "<dd>response_too_long (length_filter)</dd>",
			"answer 0 of task 0", "answer 3 of task 0",
		}},
		{name: "group: markup in a response escaped", url: "/group?batch=0&task=0",
			want: []string{"&lt;script&gt;window.__xss = 1&lt;/script&gt;&lt;img src=x"}, not: []string{"<script>window", "<img src=x"}},
		{name: "search: markup in a response escaped", url: "/search?q=__xss",
			want: []string{`<td class="snippet">&lt;script&gt;window.__xss = 1&lt;/script&gt;`}, not: []string{"<script>window", "<img src=x"}},
		{name: "rollout: text escaped, tokens coloured by advantages", url: "/rollout?id=0", want: []string{
			`<pre class="text" id="prompt-text">What is 0 &#43; 0?</pre>`,
			"&lt;script&gt;window.__xss = 1&lt;/script&gt;&lt;img src=x onerror=&#34;window.__xss = 2&#34;&gt; &amp; &#34;quoted&#34;",
			`<span class="tok prompt">100</span>`,
			`<span class="tok s10" title="advantages[0] = -0.5">7</span>`,
			`<option selected>advantages</option>`,
		}, not: []string{"<script>window", "<img src=x"}},
		{name: "rollout coloured by logprobs", url: "/rollout?id=1&color=logprobs", want: []string{
			`<span class="tok s2" title="logprobs[0] = -0.5">7</span>`,
			`<span class="tok s10" title="logprobs[2] = -2.5">9</span>`,
		}},
		{name: "rollout coloured by the mask", url: "/rollout?id=1&color=action_mask", want: []string{
			`<span class="tok s0" title="action_mask[3] = false">1</span>`,
		}},
		{name: "rollout of the rejected store", url: "/rollout?id=35", want: []string{"dropped: response_too_long (length_filter)", "answer 3 of task 0"}},
		{name: "search text", url: "/search?q=ANSWER+3+of+task+2", rows: map[string][]string{"results": {
			"id batch task run reward dropped response",
			"11 0 2 3 1 answer 3 of task 2",
			"30 2 2 3 1 answer 3 of task 2",
			"34 1 2 3 1 reward_std_below_threshold answer 3 of task 2",
		}}},
		{name: "search regex", url: "/search?mode=regex&q=%5Eanswer+%5B13%5D+of+task+1%24", rows: map[string][]string{"results": {
			"id batch task run reward dropped response",
			"5 0 1 1 1 answer 1 of task 1",
			"7 0 1 3 1 answer 3 of task 1",
			"17 1 1 1 0 answer 1 of task 1",
			"19 1 1 3 0 answer 3 of task 1",
			"24 2 1 1 1 answer 1 of task 1",
			"26 2 1 3 1 answer 3 of task 1",
		}}},
		{name: "search tokens", url: "/search?mode=tokens&q=8+9+3", want: []string{`href="/rollout?id=3&amp;mark=8%209%203"`}},
		{name: "search marks the tokens", url: "/rollout?id=3&mark=8+9+3", want: []string{`<span class="tok s10 mark" title="advantages[1] = 0.5">8</span>`}},
		{name: "search: no match", url: "/search?q=nothing+like+this", want: []string{"No rollout matches."}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := get(t, srv.Client(), srv.URL+c.url)
			if code != http.StatusOK {
				t.Fatalf("status %d, body %s", code, body)
			}
			for _, w := range c.want {
				if !strings.Contains(body, w) {
					t.Errorf("the page lacks %q", w)
				}
			}
			for _, w := range c.not {
				if strings.Contains(body, w) {
					t.Errorf("the page holds %q", w)
				}
			}
			for id, want := range c.rows {
				got := rowsOf(body, id)
				if strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Errorf("table %s:\n got %q\nwant %q", id, got, want)
				}
			}
		})
	}
}

// experimentsTable is a table of two experiments (a: batches 0 and 1, b: 0
// and 2; their rows are experiments-a.jsonl and experiments-b.jsonl beside
// it), without recorded configs.
const experimentsTable = "../../fixtures/tables/experiments"

// TestExperiments: over a table of two experiments the overview lists them
// (the view experiments), its curves hold a series each and its steps
// table names each step's experiment; the steps, a step's groups and a
// group are those of the experiment asked for, which must be one of the
// table's. The values are computed by hand from the fixture's rows.
func TestExperiments(t *testing.T) {
	_, srv := serveTestViewer(t, Options{Store: experimentsTable, AllowSQL: true, Threads: 1})
	const steps = "experiment batch groups rollouts reward_mean reward_std adv_mean entropy_mean length_mean dropped_groups"
	const groups = "experiment task rollouts dropped reward_mean reward_std adv_mean adv_min adv_max length_mean status dropped_by drop_reason"
	for _, c := range []struct {
		name, url string
		code      int
		want      []string // in the body
		rows      map[string][]string
	}{
		{name: "overview", url: "/", code: 200, want: []string{
			`id="n-steps">4<`,
			`{"adv_mean":null,"batch":"2","dropped_groups":1,"entropy_mean":2,"experiment":"b","filtered_share":0.6666666666666666,"length_mean":2.6666666666666665,"reward_mean":0.5,"reward_std":0.3535533905932738,"x":2}`,
			`<option value="">all</option><option>a</option><option>b</option>`,
		}, rows: map[string][]string{
			"experiments-table": {
				"experiment algorithm_type repeat_times learning_rate model_path project group name first_step last_step rows",
				"a – – – – – – – 0 1 4",
				"b – – – – – – – 0 2 4",
			},
			"steps-table": {
				steps,
				"a 0 1 2 0.5 0.7071 – 1 3 1",
				"b 0 1 1 0.5 – – 3 3 0",
				"a 1 1 2 0.75 0.3536 – 1.25 4 0",
				"b 2 1 3 0.5 0.3536 – 2 2.667 1",
			},
		}},
		{name: "steps of b", url: "/?experiment=b", code: 200, want: []string{`<option selected>b</option>`, `href="/step?batch=2&amp;experiment=b"`}, rows: map[string][]string{"steps-table": {
			steps,
			"b 0 1 1 0.5 – – 3 3 0",
			"b 2 1 3 0.5 0.3536 – 2 2.667 1",
		}}},
		{name: "step of both", url: "/step?batch=0", code: 200, rows: map[string][]string{
			"step-numbers": {"experiment a groups 1 rollouts 2 reward mean ± std 0.5 ± 0.7071 dropped groups 1", "experiment b groups 1 rollouts 1 reward mean ± std 0.5 ± – dropped groups 0"},
			"groups-table": {groups, "a 0 2 1 0.5 0.7071 – – – 3 partly dropped zero_std", "b 0 1 0 0.5 0 – – – 3 kept"},
		}},
		{name: "step of a", url: "/step?batch=0&experiment=a", code: 200, want: []string{`href="/group?batch=0&amp;task=0&amp;experiment=a"`}, rows: map[string][]string{
			"groups-table": {groups, "a 0 2 1 0.5 0.7071 – – – 3 partly dropped zero_std"},
		}},
		{name: "group of b", url: "/group?batch=2&task=0&experiment=b", code: 200, want: []string{`href="/step?batch=2&amp;experiment=b">step 2 of b</a>`, "<dd>stale ()</dd>"}},
		{name: "rollout of b", url: "/rollout?id=5", code: 200, want: []string{`href="/group?batch=2&amp;task=0&amp;experiment=b"`}},
		{name: "SQL over the experiments view", url: "/sql?q=" + url.QueryEscape("SELECT experiment, last_step, rows FROM experiments"), code: 200,
			rows: map[string][]string{"sql-result": {"experiment last_step rows", "a 1 4", "b 2 4"}}},
		{name: "unknown experiment", url: "/?experiment=c", code: 400, want: []string{"parameter experiment: want one of the store&#39;s experiments a, b, got &#34;c&#34;"}},
		{name: "step not in the experiment", url: "/step?batch=1&experiment=b", code: 404, want: []string{"the experiment &#34;b&#34; has no explore step (batch) &#34;1&#34;"}},
		{name: "group without its experiment", url: "/group?batch=0&task=0", code: 400, want: []string{"missing parameter experiment (the store&#39;s experiments: a, b)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := get(t, srv.Client(), srv.URL+c.url)
			if code != c.code {
				t.Fatalf("status %d, want %d; body %s", code, c.code, body)
			}
			for _, w := range c.want {
				if !strings.Contains(body, w) {
					t.Errorf("the page lacks %q", w)
				}
			}
			for id, want := range c.rows {
				if got := rowsOf(body, id); strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Errorf("table %s:\n got %q\nwant %q", id, got, want)
				}
			}
		})
	}
}

// TestFirstPass: before the index's second pass has run, the overview and
// the steps' pages show what the stores' scalars give, advantage and length
// as "–", and say that the rollouts are being indexed; a group's page
// waits for the index, then shows its rollouts; afterwards the pages show
// advantage and length, and say nothing of indexing.
func TestFirstPass(t *testing.T) {
	hold := make(chan struct{})
	s, rej := testStores(t, 3)
	v, srv := serveTestViewer(t, Options{Store: s, Rejected: rej, Threads: 1, hold: hold})
	const indexing = `id="indexing">Indexing the rollouts: 0 of 36;`
	for _, c := range []struct {
		url, table string
		want       []string
	}{
		{"/", "steps-table", []string{
			"batch groups rollouts reward_mean reward_std adv_mean length_mean dropped_groups",
			"0 3 12 0.5 0.5222 – – 0",
			"1 3 12 0.6667 0.4924 – – 1",
			"2 3 12 0.5 0.5222 – – 1",
		}},
		{"/step?batch=2", "groups-table", []string{
			"task rollouts dropped reward_mean reward_std adv_mean adv_min adv_max length_mean status dropped_by drop_reason",
			"0 4 1 0.5 0.5774 – – – – partly dropped length_filter response_too_long",
			"1 4 0 0.5 0.5774 – – – – kept",
			"2 4 0 0.5 0.5774 – – – – kept",
		}},
	} {
		code, body := get(t, srv.Client(), srv.URL+c.url)
		if code != http.StatusOK || !strings.Contains(body, indexing) {
			t.Errorf("%s: status %d, want 200 saying %q; body:\n%s", c.url, code, indexing, body)
		}
		if got := rowsOf(body, c.table); strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%s: table %s:\n got %q\nwant %q", c.url, c.table, got, c.want)
		}
	}
	group := make(chan string)
	go func() {
		resp, err := srv.Client().Get(srv.URL + "/group?batch=2&task=0")
		if err != nil {
			group <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		group <- string(b)
	}()
	select {
	case body := <-group:
		t.Fatalf("the group's page came before the index:\n%s", body)
	case <-time.After(100 * time.Millisecond):
	}
	close(hold)
	if body := <-group; !strings.Contains(body, "answer 3 of task 0") || strings.Contains(body, `id="indexing"`) {
		t.Errorf("the group's page after the index lacks its rollouts or says it indexes:\n%s", body)
	}
	if err := v.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	code, body := get(t, srv.Client(), srv.URL+"/")
	if want := "0 3 12 0.5 0.5222 0 4 0"; code != http.StatusOK || !slices.Contains(rowsOf(body, "steps-table"), want) || strings.Contains(body, `id="indexing"`) {
		t.Errorf("/ after the index: status %d, want the row %q and no indexing note; body:\n%s", code, want, body)
	}
}

// TestSecondPassFails: when the second pass cannot read the store (here,
// gone after the first), the pages say why, and a page reading the index
// rows is refused with the reason, naming the store, instead of waiting.
func TestSecondPassFails(t *testing.T) {
	hold := make(chan struct{})
	s, rej := testStores(t, 3)
	v, srv := serveTestViewer(t, Options{Store: s, Rejected: rej, Threads: 1, hold: hold})
	if err := os.Remove(s); err != nil {
		t.Fatal(err)
	}
	close(hold)
	if err := v.Wait(context.Background()); err == nil || !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), "store.parquet") {
		t.Fatalf("Wait: %v; want bad input naming store.parquet", err)
	}
	if code, body := get(t, srv.Client(), srv.URL+"/"); code != http.StatusOK || !strings.Contains(body, `id="indexing">The rollouts could not be indexed: `) {
		t.Errorf("/: status %d, want 200 saying the rollouts could not be indexed; body:\n%s", code, body)
	}
	if code, body := get(t, srv.Client(), srv.URL+"/group?batch=0&task=0"); code != http.StatusBadRequest || !strings.Contains(body, "store.parquet") {
		t.Errorf("/group: status %d, want 400 naming store.parquet; body:\n%s", code, body)
	}
}

// TestSearchPages: a search page reads at most searchRows rollouts, says
// which it searched and links the page searching on, across the store's
// end into the rejected store's rows.
func TestSearchPages(t *testing.T) {
	s, rej := testStores(t, 3)
	_, srv := serveTestViewer(t, Options{Store: s, Rejected: rej, Threads: 1, searchRows: 10})
	for _, c := range []struct {
		url     string
		results []string
		want    string
	}{
		{"/search?q=answer+3", []string{"id batch task run reward dropped response", "3 0 0 3 1 answer 3 of task 0", "7 0 1 3 1 answer 3 of task 1"},
			`Searched the rollouts 0–9 of 36 (by id). <a href="/search?from=10&amp;mode=text&amp;q=answer&#43;3" rel="next">search on →</a>`},
		{"/search?q=answer+3&from=10", []string{"id batch task run reward dropped response", "11 0 2 3 1 answer 3 of task 2", "15 1 0 3 1 answer 3 of task 0", "19 1 1 3 0 answer 3 of task 1"},
			`Searched the rollouts 10–19 of 36 (by id). <a href="/search?from=20&amp;mode=text&amp;q=answer&#43;3" rel="next">search on →</a>`},
		{"/search?q=answer+3&from=28", []string{"id batch task run reward dropped response", "30 2 2 3 1 answer 3 of task 2", "34 1 2 3 1 reward_std_below_threshold answer 3 of task 2", "35 2 0 3 1 response_too_long answer 3 of task 0"},
			`Searched the rollouts 28–35 of 36 (by id).</p>`},
		{"/search?q=answer+3&from=36", []string{"id batch task run reward dropped response", "No rollout matches."},
			`No rollout from id 36 on: there are 36.</p>`},
	} {
		code, body := get(t, srv.Client(), srv.URL+c.url)
		if code != http.StatusOK || !strings.Contains(body, c.want) {
			t.Errorf("%s: status %d, want 200 with %q; body:\n%s", c.url, code, c.want, body)
		}
		if got := rowsOf(body, "results"); strings.Join(got, "\n") != strings.Join(c.results, "\n") {
			t.Errorf("%s: results\n got %q\nwant %q", c.url, got, c.results)
		}
	}
}

func TestBadRequests(t *testing.T) {
	_, srv := newTestViewer(t, 3, false)
	for _, c := range []struct {
		url  string
		code int
		msg  string
	}{
		{"/?page=0", 400, "parameter page: want an integer in [1, 1000000], got &#34;0&#34;"},
		{"/?page=two", 400, "parameter page: want an integer"},
		{"/?sort=reward_mean;DROP", 400, "bad query string"},
		{"/?sort=random()", 400, "parameter sort: want one of batch, groups"},
		{"/?dir=sideways", 400, "parameter dir: want one of asc, desc"},
		{"/?evil=1", 400, "unknown parameter &#34;evil&#34;"},
		{"/?page=1&page=2", 400, "parameter page given 2 times"},
		{"/step", 400, "missing parameter batch"},
		{"/step?batch=99", 404, "the store has no explore step (batch) &#34;99&#34;"},
		{"/step?batch=1&status=gone", 400, "parameter status: want one of kept, dropped, partly dropped"},
		{"/step?batch=%3Cscript%3Ealert(1)%3C/script%3E", 404, "&#34;&lt;script&gt;alert(1)&lt;/script&gt;&#34;"},
		{"/step?batch=%ff", 400, "want UTF-8 text"},
		{"/group?batch=1", 400, "missing parameter task"},
		{"/group?batch=1&task=7", 404, "the store has no group batch &#34;1&#34;, task &#34;7&#34;"},
		{"/?experiment=a", 400, "parameter experiment: the store has no experiments (no experiment column of several values), got &#34;a&#34;"},
		{"/rollout", 400, "missing parameter id"},
		{"/rollout?id=-1", 400, "parameter id: want an integer in [0, 35]"},
		{"/rollout?id=36", 400, "parameter id: want an integer in [0, 35]"},
		{"/rollout?id=1e3", 400, "parameter id"},
		{"/rollout?id=1&color=tokens", 400, "parameter color: want one of logprobs, action_mask, advantages"},
		{"/rollout?id=1&mark=x", 400, "token search: &#34;x&#34; is not a token id"},
		{"/search?q=x&mode=sql", 400, "parameter mode: want one of text, regex, tokens"},
		{"/search?q=(&mode=regex", 400, "bad regular expression: error parsing regexp: missing closing )"},
		{"/search?q=1+-2&mode=tokens", 400, "token search: &#34;-2&#34; is not a token id"},
		{"/search?q=" + strings.Repeat("1+", 65) + "&mode=tokens", 400, "want 1 to 64 token ids"},
		{"/search?q=" + strings.Repeat("x", 1001), 400, "want UTF-8 text of at most 1000 bytes"},
		{"/sql?q=SELECT+1", 403, "the SQL box is off: start rftpipe view with --allow-sql"},
		{"/nothing", 404, "no such page"},
		{"/assets/nothing.js", 404, "no such asset"},
	} {
		t.Run(c.url, func(t *testing.T) {
			code, body := get(t, srv.Client(), srv.URL+c.url)
			if code != c.code || !strings.Contains(body, c.msg) {
				t.Errorf("status %d, want %d with %q; body:\n%s", code, c.code, c.msg, body)
			}
			if strings.Contains(body, "goroutine") || strings.Contains(body, ".go:") {
				t.Errorf("the page shows a trace:\n%s", body)
			}
		})
	}
}

func TestReadOnlyMethods(t *testing.T) {
	_, srv := newTestViewer(t, 1, true)
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		req, _ := http.NewRequest(m, srv.URL+"/sql?q=SELECT+1", strings.NewReader("q=SELECT+1"))
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s: status %d, Allow %q; want 405 and GET, HEAD", m, resp.StatusCode, resp.Header.Get("Allow"))
		}
	}
}

// TestPathTraversal: only the embedded assets are served, by exact name;
// no path reaches a file of the disk.
func TestPathTraversal(t *testing.T) {
	_, srv := newTestViewer(t, 1, false)
	noRedirect := *srv.Client()
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for _, p := range []string{
		"/assets/../view.go", "/assets/%2e%2e/view.go", "/assets/..%2fview.go", "/assets/..%5cview.go",
		"/assets/%2e%2e%2f%2e%2e%2fgo.mod", "/../../../../etc/passwd", "/assets/.%2e/templates/base.html",
		"/assets/view.js/../../view_test.go", "/assets//etc/passwd", "/assets/../../../etc/passwd", "/view.go",
		"/templates/base.html", "/assets/", "/assets/.hidden",
	} {
		req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.URL.Opaque = p // sent as is, not cleaned by the client
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusOK:
			t.Errorf("%s: served (status 200)", p)
		case strings.Contains(string(body), "package view") || strings.Contains(string(body), "root:"):
			t.Errorf("%s: a file's content came back", p)
		case resp.StatusCode/100 == 3 && !strings.HasPrefix(resp.Header.Get("Location"), "/"):
			t.Errorf("%s: redirected off the site to %q", p, resp.Header.Get("Location"))
		}
	}
	code, body := get(t, srv.Client(), srv.URL+"/assets/view.js")
	if code != http.StatusOK || !strings.Contains(body, "rftpipe view") {
		t.Errorf("the script is not served: status %d", code)
	}
}

func TestSQLBox(t *testing.T) {
	_, srv := newTestViewer(t, 3, true)
	for _, c := range []struct {
		q    string
		code int
		want string
	}{
		{"SELECT count(*) AS n FROM experiences", 200, "<tr><th>n</th></tr>\n<tr><td>31</td></tr>"},
		{"SELECT drop_reason, count(*) AS n FROM rejected GROUP BY ALL ORDER BY n", 200, "<tr><td>response_too_long</td><td>1</td></tr>"},
		{"WITH g AS (SELECT * FROM groups WHERE status = 'dropped') SELECT batch, task FROM g", 200, "<tr><td>1</td><td>2</td></tr>"},
		{"SELECT response_text FROM experiences WHERE batch = 0 AND task = 0 AND run = 0", 200, "&lt;script&gt;window.__xss = 1&lt;/script&gt;"},
		{"SELECT * FROM read_csv('/etc/passwd')", 400, "table functions are refused"},
		{"SELECT * FROM '/etc/passwd'", 400, "can be read, not &#34;/etc/passwd&#34;"},
		{"SELECT * FROM (WITH x AS (SELECT 1) SELECT * FROM x), 'view.go'", 400, "can be read, not &#34;view.go&#34;"},
		{`WITH "view.go" AS (SELECT 1) SELECT * FROM "view.go"`, 400, "name a WITH query with letters"},
		{"SELECT * FROM information_schema.tables", 400, "can be read, not &#34;tables&#34;"},
		{"SELECT * FROM duckdb_settings()", 400, "table functions are refused"},
		{"COPY experiences TO 'x.csv'", 400, "only SELECT queries over the views are run"},
		{"ATTACH 'x.db'", 400, "only SELECT queries over the views are run"},
		{"CREATE TABLE t AS SELECT 1", 400, "only SELECT queries over the views are run"},
		{"SELECT 1; DROP VIEW experiences", 400, "only SELECT queries over the views are run"},
		{"SET enable_external_access = true", 400, "only SELECT queries over the views are run"},
		{"SELECT nope FROM experiences", 400, "Referenced column &#34;nope&#34; not found"},
	} {
		t.Run(c.q, func(t *testing.T) {
			code, body := get(t, srv.Client(), srv.URL+"/sql?q="+url.QueryEscape(c.q))
			if code != c.code || !strings.Contains(body, c.want) {
				t.Errorf("status %d, want %d with %q; body:\n%s", code, c.code, c.want, body)
			}
		})
	}
	// The refused statements changed nothing.
	if code, body := get(t, srv.Client(), srv.URL+"/sql?q="+url.QueryEscape("SELECT count(*) AS n FROM experiences")); code != 200 || !strings.Contains(body, "<td>31</td>") {
		t.Errorf("the views changed: %d %s", code, body)
	}
}

// TestServeShutdown: Serve returns nil once its context is done, after the
// request in flight is answered.
func TestServeShutdown(t *testing.T) {
	v, _ := newTestViewer(t, 1, false)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- v.Serve(ctx, ln, 5*time.Second) }()
	code, _ := get(t, http.DefaultClient, "http://"+ln.Addr().String()+"/")
	if code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context was done")
	}
	if _, err := http.Get("http://" + ln.Addr().String() + "/"); err == nil {
		t.Error("the server still answers after shutdown")
	}
}

// TestServeLoopbackHosts: served on loopback, the viewer answers requests
// for loopback names only (a DNS rebinding's foreign Host gets a 421).
func TestServeLoopbackHosts(t *testing.T) {
	v, _ := newTestViewer(t, 1, false)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go v.Serve(ctx, ln, time.Second)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	for host, want := range map[string]int{
		"127.0.0.1:" + port: 200, "localhost:" + port: 200, "[::1]:" + port: 200, "localhost": 200,
		"evil.example:" + port: 421, "evil.example": 421, "192.168.1.5:" + port: 421,
	} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %s: status %d, want %d", host, resp.StatusCode, want)
		}
	}
}

// TestTrinitySFT: a Trinity SFT buffer's rows (empty batch and task, the
// messages as text), read through the conversion to Parquet, are one group
// of the empty step.
func TestTrinitySFT(t *testing.T) {
	v, err := Open(context.Background(), Options{Store: "../../fixtures/trinity/sft.jsonl", Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	srv := httptest.NewServer(v)
	defer srv.Close()
	for u, want := range map[string]string{
		"/":                       `<a href="/step?batch=">`,
		"/step?batch=":            `<a href="/group?batch=&amp;task=">`,
		"/group?batch=&task=":     `<article class="card">`,
		"/rollout?id=0":           `<pre class="text" id="messages">[`,
		"/search?q=the&mode=text": `<a href="/rollout?id=`,
	} {
		code, body := get(t, srv.Client(), srv.URL+u)
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("%s: status %d, want 200 with %q; body:\n%s", u, code, want, body)
		}
	}
}

func TestOpenBadStore(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ path, want string }{
		{filepath.Join(dir, "absent.parquet"), "absent.parquet"},
		{filepath.Join(dir, "*.parquet"), "*.parquet"},
	} {
		_, err := Open(context.Background(), Options{Store: c.path, Threads: 1})
		if err == nil || !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%s): %v; want bad input naming %s", c.path, err, c.want)
		}
	}
}
