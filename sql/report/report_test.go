package report

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"html"
	"image/png"
	"io"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v17/arrow/array"
	"gonum.org/v1/plot/plotter"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/sql/duckdb"
)

const demo = "../../fixtures/stores/demo.parquet"

var (
	sectionRE = regexp.MustCompile(`<section id="([^"]+)">`)
	imgRE     = regexp.MustCompile(`<img src="data:image/png;base64,([^"]+)" alt="([^"]*)">`)
)

func render(t *testing.T, o Options) string {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(context.Background(), o, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// checkPage asserts every section is present, in order, and every image
// decodes as a PNG of the plot size; it returns the sections holding an image.
func checkPage(t *testing.T, page string) map[string]bool {
	t.Helper()
	return checkSections(t, page, Sections)
}

// checkSections is checkPage for a page whose sections are want.
func checkSections(t *testing.T, page string, want []string) map[string]bool {
	t.Helper()
	var ids []string
	for _, m := range sectionRE.FindAllStringSubmatch(page, -1) {
		ids = append(ids, m[1])
	}
	if strings.Join(ids, ",") != strings.Join(want, ",") {
		t.Fatalf("sections %v, want %v", ids, want)
	}
	withImage := map[string]bool{}
	for i, part := range strings.Split(page, "<section id=")[1:] {
		for _, m := range imgRE.FindAllStringSubmatch(part, -1) {
			raw, err := base64.StdEncoding.DecodeString(m[1])
			if err != nil {
				t.Fatalf("section %s: image is not base64: %v", ids[i], err)
			}
			img, err := png.Decode(bytes.NewReader(raw))
			if err != nil {
				t.Fatalf("section %s: image does not decode: %v", ids[i], err)
			}
			if b := img.Bounds(); b.Dx() != 960 || b.Dy() != 432 {
				t.Errorf("section %s: image is %v, want 960×432", ids[i], b)
			}
			withImage[ids[i]] = true
		}
	}
	if strings.Contains(page, "http://") || strings.Contains(page, "https://") || strings.Contains(page, "<script") {
		t.Error("the page should be self-contained and script-free")
	}
	return withImage
}

// value returns the value cell of a key-number row.
func value(t *testing.T, page, label string) string {
	t.Helper()
	m := regexp.MustCompile(`<td>` + regexp.QuoteMeta(label) + `</td><td class="value">([^<]*)</td>`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no key number %q", label)
	}
	return m[1]
}

// groupCounts streams a store and counts rows, tid groups and zero-variance
// groups (n > 1, all rewards equal), independently of DuckDB.
func groupCounts(t *testing.T, path string) (rows, groups, zero int) {
	t.Helper()
	r, err := store.Open(path, store.Columns(schema.Batch, schema.Task, schema.Reward))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	type g struct {
		n        int
		first    float32
		constant bool
	}
	seen := map[string]*g{}
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, tk, rw := rec.Column(0), rec.Column(1), rec.Column(2).(*array.Float64)
		for i := 0; i < int(rec.NumRows()); i++ {
			rows++
			key := string(schema.AppendKey(nil, i, b, tk))
			v := float32(rw.Value(i))
			if x := seen[key]; x == nil {
				seen[key] = &g{1, v, true}
			} else {
				x.n++
				x.constant = x.constant && v == x.first
			}
		}
	}
	for _, x := range seen {
		if x.n > 1 && x.constant {
			zero++
		}
	}
	return rows, len(seen), zero
}

func TestReportDemo(t *testing.T) {
	page := render(t, Options{Store: demo, Threads: 2})
	imgs := checkPage(t, page)
	for _, id := range []string{SecReward, SecRewardByBatch, SecGroupStd, SecGroups, SecLength} {
		if !imgs[id] {
			t.Errorf("section %s has no plot", id)
		}
	}
	if imgs[SecAdvantages] || !strings.Contains(page, "no advantages column") {
		t.Error("the demo store has no advantages: the section should say so")
	}
	rows, groups, zero := groupCounts(t, demo)
	if got := value(t, page, "experiences (rows)"); got != fint(float64(rows)) {
		t.Errorf("rows %s, want %d", got, rows)
	}
	if got := value(t, page, "groups"); got != fint(float64(groups)) {
		t.Errorf("groups %s, want %d", got, groups)
	}
	want := fmt.Sprintf("%d (%s)", zero, fpct(float64(zero)/float64(groups)))
	if got := value(t, page, "zero-variance groups"); got != want {
		t.Errorf("zero-variance groups %s, want %s", got, want)
	}
	// std_threshold = 0 drops exactly the zero-variance groups (no singletons here).
	if got := value(t, page, "dropped at std_threshold = 0"); !strings.HasPrefix(got, fmt.Sprintf("%d groups", zero)) {
		t.Errorf("dropped %s, want %d groups", got, zero)
	}
	for _, label := range []string{"reward mean ± std", "pass@k over tasks", "response length mean", "response truncated"} {
		value(t, page, label)
	}
}

// A threshold above every std drops every group.
func TestReportThreshold(t *testing.T) {
	page := render(t, Options{Store: demo, StdThreshold: 1, Threads: 2})
	checkPage(t, page)
	_, groups, _ := groupCounts(t, demo)
	if got := value(t, page, "dropped at std_threshold = 1"); !strings.HasPrefix(got, fmt.Sprintf("%d groups (100.00 %%)", groups)) {
		t.Errorf("dropped %s, want all %d groups", got, groups)
	}
}

// After `rftpipe run`: advantages (a histogram) and duplicate_of (numbers).
func TestReportRunStore(t *testing.T) {
	db, err := duckdb.Open(duckdb.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := duckdb.Attach(ctx, db, []duckdb.Store{{Path: demo}}, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "run.parquet")
	// Advantages ±1 on the masked tokens, and task 3's rows marked as copies.
	_, err = duckdb.CopyParquet(ctx, db, `SELECT *,
		list_transform(action_mask, m -> CASE WHEN m THEN (2 * reward - 1)::FLOAT ELSE 0::FLOAT END) AS advantages,
		CASE WHEN task = 3 THEN 0 END::BIGINT AS duplicate_of
		FROM experiences`, path)
	if err != nil {
		t.Fatal(err)
	}
	page := render(t, Options{Store: path, Threads: 2})
	imgs := checkPage(t, page)
	if !imgs[SecAdvantages] || !imgs[SecGroups] {
		t.Errorf("plots: %v; want advantages and groups", imgs)
	}
	if got := value(t, page, "advantage min / max"); got != "-1 / 1" {
		t.Errorf("advantage min / max %s, want -1 / 1", got)
	}
	if got := value(t, page, "groups holding duplicated rows"); got != "3 of 48" {
		t.Errorf("duplicated groups %s, want 3 of 48 (task 3 of 3 batches)", got)
	}
	if got := value(t, page, "duplicated rows"); got != "24 (6.25 %)" {
		t.Errorf("duplicated rows %s, want 24 (6.25 %%)", got)
	}
}

// A DPO store has no rewards: the page still renders, saying so.
func TestReportDPO(t *testing.T) {
	page := render(t, Options{Store: "../../fixtures/stores/dpo.parquet", Threads: 2})
	imgs := checkPage(t, page)
	if imgs[SecReward] || !strings.Contains(page, "no reward column") || !imgs[SecLength] {
		t.Errorf("DPO page: plots %v", imgs)
	}
}

func TestReportBadStore(t *testing.T) {
	err := Write(context.Background(), Options{Store: "nope.parquet"}, io.Discard)
	if !errors.Is(err, schema.ErrBadInput) {
		t.Errorf("missing store: %v, want bad input", err)
	}
}

func TestFormatting(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{fint(1000000), "1,000,000"}, {fint(-1234), "-1,234"}, {fint(12), "12"},
		{fnum(0.46354), "0.4635"}, {fnum(3), "3"}, {fnum(math.NaN()), "–"},
		{fpct(0.1875), "18.75 %"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestMovingAverage(t *testing.T) {
	var pts plotter.XYs
	for i := 0; i < 10; i++ {
		pts = append(pts, plotter.XY{X: float64(i), Y: float64(i)})
	}
	ma := movingAverage(pts, 3)
	// Centred window of 3 (one each side): the mean of i-1, i, i+1.
	for i := 1; i < 9; i++ {
		if ma[i].Y != float64(i) {
			t.Errorf("ma[%d] = %v, want %d", i, ma[i].Y, i)
		}
	}
	if ma[0].Y != 0.5 || ma[9].Y != 8.5 {
		t.Errorf("edges %v %v, want 0.5 8.5", ma[0].Y, ma[9].Y)
	}
}

// TestReportInvalidRewards renders a store whose rewards include NaN,
// infinite and null values: the page is complete, counts them and says
// they are left out.
func TestReportInvalidRewards(t *testing.T) {
	db, err := duckdb.Open(duckdb.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	path := filepath.Join(t.TempDir(), "bad.parquet")
	_, err = db.Exec(`COPY (SELECT * REPLACE (CASE WHEN run = 0 THEN 'NaN'::DOUBLE WHEN run = 1 AND task % 2 = 0 THEN NULL
		WHEN run = 2 AND task = 3 THEN '-Infinity'::DOUBLE ELSE reward END AS reward) FROM '` + demo + `') TO '` + path + `' (FORMAT parquet)`)
	if err != nil {
		t.Fatal(err)
	}
	var invalid int
	if err := db.QueryRow(`SELECT count(*) FROM '` + path + `' WHERE reward IS NULL OR NOT isfinite(reward)`).Scan(&invalid); err != nil {
		t.Fatal(err)
	}
	page := render(t, Options{Store: path, Bins: 20})
	checkPage(t, page)
	if got := value(t, page, "null, NaN or infinite rewards"); got != fmt.Sprint(invalid) {
		t.Errorf("invalid rewards %q, want %d", got, invalid)
	}
	if want := fmt.Sprintf("%d rows with a null, NaN or infinite reward are left out", invalid); !strings.Contains(page, want) {
		t.Errorf("the group std caption lacks %q", want)
	}
}

// TestReportTrinityBuffers: buffers whose rows partly lack advantages (null
// lists) report, 0.5 and 0.6 layouts.
func TestReportTrinityBuffers(t *testing.T) {
	for _, db := range []string{"../../fixtures/trinity/experience.db", "../../fixtures/trinity/v0.6/experience.db"} {
		abs, err := filepath.Abs(db)
		if err != nil {
			t.Fatal(err)
		}
		page := render(t, Options{Store: "sqlite:///" + abs + "?table=experience_buffer", Threads: 2})
		if !strings.Contains(page, "advantage") {
			t.Errorf("%s: the page shows no advantage", db)
		}
	}
}

// TestReportExperiments renders a table of two experiments: every per-batch
// plot is one line per experiment, and a table gives each experiment's
// numbers, with the values computed by hand from the table's rows
// (fixtures/tables/experiments-*.jsonl).
func TestReportExperiments(t *testing.T) {
	const tbl = "../../fixtures/tables/experiments"
	page := render(t, Options{Store: tbl, Threads: 2})
	want := slices.Concat(Sections[:3], ExperimentSections, Sections[3:])
	withImage := checkSections(t, page, want)
	for _, id := range []string{SecRewardByBatch, SecFilteredByBatch, SecLengthByBatch, SecEntropyByBatch} {
		if !withImage[id] {
			t.Errorf("section %s has no plot", id)
		}
	}
	if withImage[SecAdvantageByBatch] || strings.Count(page, "2 experiments, one line each") != 4 {
		t.Errorf("plots %v: want one line per experiment on the reward, filtered, length and entropy plots, a note on advantages", withImage)
	}
	// Groups never span experiments: a's batches 0 and 1 and b's 0 and 2
	// (task 0 each) are 4 groups, their runs 4 + 4, though a and b share
	// batch 0, task 0, run 0.
	for _, n := range []string{"<td>tasks (groups, tid = batch/task)</td><td class=\"value\">4</td>", "<td>runs (batch/task/run)</td><td class=\"value\">8</td>"} {
		if !strings.Contains(page, n) {
			t.Errorf("the page lacks %s", n)
		}
	}
	// So are the GRPO groups and the group std plot's: b's batch 0 is the
	// one singleton, which std_threshold = 0 drops; the others' stds are
	// √0.5, √0.125 and √0.125.
	if g, s := value(t, page, "groups"), value(t, page, "singleton groups"); g != "4" || s != "1" {
		t.Errorf("groups %s, singleton groups %s; want 4, 1", g, s)
	}
	if c := "within each experiment"; !strings.Contains(page, c) {
		t.Errorf("the group std caption lacks %q", c)
	}
	if c := "every singleton group (1 here): 1 of 4 groups."; !strings.Contains(page, c) {
		t.Errorf("the group std caption lacks %q", c)
	}

	// The numbers per experiment. a: rewards 1, 0, 1, 0.5; one of 4 rows
	// filtered; responses of 2, 4, 6, 2 tokens, 2, 3, 6, 2 of them masked,
	// their entropies summing to 2, 3, 12, 1. b: rewards 0.5, 0.25, 0.75 and
	// a null; 2 of 4 filtered; responses of 3, 1, 5, 2 tokens, 3, 1, 5, 1
	// masked, entropies summing to 9, 1, 5, 4.
	std := func(xs ...float64) float64 {
		var m, ss float64
		for _, x := range xs {
			m += x / float64(len(xs))
		}
		for _, x := range xs {
			ss += (x - m) * (x - m)
		}
		return math.Sqrt(ss / float64(len(xs)-1))
	}
	header := []string{"experiment", "rows", "explore batches", "model versions", "reward mean ± std",
		"null, NaN or infinite rewards", "filtered rows", "response length mean", "entropy mean"}
	rows := [][]string{
		{"a", "4", "2", "0 – 1", fnum(2.5/4) + " ± " + fnum(std(1, 0, 1, 0.5)), "0", fpct(0.25), fnum(14.0 / 4), fnum(18.0 / 13)},
		{"b", "4", "2", "0 – 2", fnum(0.5) + " ± " + fnum(std(0.5, 0.25, 0.75)), "1", fpct(0.5), fnum(11.0 / 4), fnum(19.0 / 10)},
	}
	if got := comparisonTable(t, page); fmt.Sprint(got) != fmt.Sprint(append([][]string{header}, rows...)) {
		t.Errorf("per-experiment table\n%q\nwant\n%q", got, append([][]string{header}, rows...))
	}

	db, err := duckdb.Open(duckdb.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := duckdb.Attach(ctx, db, []duckdb.Store{{Name: "store", Path: tbl}}, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	b := &builder{ctx: ctx, db: db}
	if err := b.load(); err != nil {
		t.Fatal(err)
	}
	// The group std plot's groups: their sizes and stds.
	groups, err := b.list("SELECT n || ' ' || coalesce(round(x, 4)::VARCHAR, '-') FROM (" + b.groupStdQuery() + ") ORDER BY n, x")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"1 -", "2 0.3536", "2 0.3536", "2 0.7071"}; !slices.Equal(groups, want) {
		t.Errorf("group std plot's groups (n, std) %q, want %q", groups, want)
	}
	// What each plot draws: batches 0 and 1 of a, 0 and 2 of b.
	for _, c := range []struct {
		y    string
		a, b []float64
	}{
		{meanReward, []float64{(1.0 + 0) / 2, (1 + 0.5) / 2}, []float64{0.5, (0.25 + 0.75) / 2}}, // b's null reward left out
		{experimentPlots[0].y, []float64{50, 0}, []float64{0, 100 * 2.0 / 3}},
		{experimentPlots[1].y, []float64{(2 + 4) / 2.0, (6 + 2) / 2.0}, []float64{3, (1 + 5 + 2) / 3.0}},
		{experimentPlots[2].y, []float64{(2 + 3) / 5.0, (12 + 1) / 8.0}, []float64{9 / 3.0, (1 + 5 + 4) / 7.0}},
	} {
		series, ordinal, err := b.perBatch(c.y)
		if err != nil || ordinal {
			t.Fatalf("%s: ordinal %v, %v", c.y, ordinal, err)
		}
		want := []stepSeries{{"a", []float64{0, 1}, c.a}, {"b", []float64{0, 2}, c.b}}
		if len(series) != 2 {
			t.Fatalf("%s: series %v, want %v", c.y, series, want)
		}
		for i, s := range series {
			w := want[i]
			if s.experiment != w.experiment || !slices.Equal(s.xs, w.xs) || len(s.ys) != len(w.ys) {
				t.Fatalf("%s: series %v, want %v", c.y, series, want)
			}
			for k := range s.ys {
				if math.Abs(s.ys[k]-w.ys[k]) > 1e-9*math.Abs(w.ys[k]) {
					t.Errorf("%s: %s batch %v: %v, want %v", c.y, s.experiment, s.xs[k], s.ys[k], w.ys[k])
				}
			}
		}
	}
}

// comparisonTable returns the cells of the page's per-experiment table,
// the header first.
func comparisonTable(t *testing.T, page string) [][]string {
	t.Helper()
	_, tbl, ok := strings.Cut(page, "<h3>Per experiment</h3>")
	if !ok {
		t.Fatal("the page has no per-experiment table")
	}
	tbl, _, _ = strings.Cut(tbl, "</table>")
	var out [][]string
	for _, tr := range regexp.MustCompile(`<tr>(.*)</tr>`).FindAllStringSubmatch(tbl, -1) {
		var row []string
		for _, td := range regexp.MustCompile(`<t[hd][^>]*>([^<]*)</t[hd]>`).FindAllStringSubmatch(tr[1], -1) {
			row = append(row, html.UnescapeString(td[1]))
		}
		out = append(out, row)
	}
	return out
}
