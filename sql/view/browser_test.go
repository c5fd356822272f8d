package view

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium returns the path of Debian's chromium. Without one the browser
// test skips, except in CI (CI=true), where .ci/run installs it and its
// absence is a failure.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed (CI installs it: apt-get install chromium)")
	}
	t.Skip("chromium is not installed (apt-get install chromium): the browser test does not run")
	return ""
}

// TestBrowser drives a real browser through the pages: overview (numbers,
// curves, hover, zoom) → step (filter) → group → rollout (text, colouring)
// → search (token ids, marked on the rollout), then the overview of a table
// of two experiments (legend, hover, experiments table) and its steps
// filtered to one. It saves a screenshot of
// each page in the test's temp dir, or in $RFTPIPE_VIEW_SCREENSHOTS when
// set (to look at them).
func TestBrowser(t *testing.T) {
	exe := chromium(t)
	_, srv := newTestViewer(t, 8, false)
	shots := t.TempDir()
	if d := os.Getenv("RFTPIPE_VIEW_SCREENSHOTS"); d != "" {
		shots = d
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.WindowSize(1280, 900), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancelCtx := chromedp.NewContext(actx)
	defer cancelCtx()
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()

	n := 0
	shot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			png, err := chromedp.FullScreenshot(100)(ctx, tg) // quality 100: PNG
			if err != nil {
				return err
			}
			n++
			return os.WriteFile(filepath.Join(shots, fmt.Sprintf("%d-%s.png", n, name)), png, 0o644)
		})
	}
	run := func(step string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	text := func(step, sel string, want ...string) {
		t.Helper()
		got, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %s shows %q, want it to hold %q", step, sel, got, w)
			}
		}
	}
	// until waits for js to be true in the page loaded next: it is
	// evaluated again while a navigation replaces the page.
	until := func(js string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			var err error
			for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
				var ok bool
				if ok, err = chromedp.Evaluate[bool](js)(ctx, tg); err == nil && ok {
					return nil
				}
			}
			return fmt.Errorf("%s stayed false: %v", js, err)
		})
	}

	// Overview: the numbers, a curve per series, the value on hover, a zoom.
	run("overview", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#plots svg circle")))
	text("overview", "#n-rollouts", "96")
	text("overview", "#n-dropped-groups", "2 (8.3%)")
	plots := evalJS[[]string](t, ctx, "overview plots", `[...document.querySelectorAll("#plots .plot h3")].map(h => h.textContent)`)
	if want := "Mean reward,Reward std (over rows),Mean advantage,Mean response length (tokens),Filtered share (dropped rollouts),Dropped groups"; strings.Join(plots, ",") != want {
		t.Errorf("plots %q, want %s", plots, want)
	}
	tip := evalJS[string](t, ctx, "hover", `(() => {
		const svg = document.querySelector("#plots .plot svg"), c = svg.querySelectorAll("circle")[2].getBoundingClientRect();
		svg.dispatchEvent(new MouseEvent("mousemove", {clientX: c.x + c.width / 2, clientY: c.y, bubbles: true}));
		return document.querySelector("#plots .plot .tip").textContent;
	})()`)
	if tip != "step 2: reward_mean = 0.5" {
		t.Errorf("hover tip %q, want the third step's mean reward", tip)
	}
	run("overview", shot("overview"))
	type zoom struct {
		Range  string
		Points int
	}
	zoomed := evalJS[zoom](t, ctx, "zoom", `(() => {
		const svg = document.querySelector("#plots .plot svg"), cs = svg.querySelectorAll("circle");
		const at = (i, type) => { const c = cs[i].getBoundingClientRect();
			svg.dispatchEvent(new MouseEvent(type, {clientX: c.x + c.width / 2, clientY: c.y, bubbles: true})); };
		at(2, "mousedown"); at(5, "mousemove"); at(5, "mouseup");
		return {Range: document.getElementById("plots").dataset.range, Points: document.querySelector("#plots .plot svg").querySelectorAll("circle").length};
	})()`)
	if zoomed.Range != "2-5" || zoomed.Points != 4 {
		t.Errorf("after dragging from step 2 to 5: range %q with %d points, want 2-5 with 4", zoomed.Range, zoomed.Points)
	}
	run("zoom", shot("overview-zoomed"))

	// Step 1: its groups; filtered to the dropped one.
	run("step", chromedp.Click(chromedp.CSS(`#steps-table a[href="/step?batch=1"]`)), chromedp.WaitVisible(chromedp.CSS("#groups-table")))
	statuses := evalJS[[]string](t, ctx, "step", `[...document.querySelectorAll("#groups-table td.status")].map(td => td.textContent)`)
	if strings.Join(statuses, ",") != "kept,kept,dropped" {
		t.Errorf("step 1's groups: %q, want kept, kept, dropped", statuses)
	}
	run("step", shot("step"))
	run("filter", chromedp.SetValue(chromedp.CSS("#status"), "dropped"), chromedp.Submit(chromedp.CSS("#group-filter")),
		until(`location.search.includes("status=dropped")`),
		chromedp.WaitVisible(chromedp.CSS("#groups-table")))
	statuses = evalJS[[]string](t, ctx, "filter", `[...document.querySelectorAll("#groups-table tr")].slice(1).map(tr => [...tr.cells].map(c => c.textContent).join(" "))`)
	if len(statuses) != 1 || !strings.Contains(statuses[0], "dropped grpo reward_std_below_threshold") {
		t.Errorf("filtered groups: %q, want the one dropped by grpo", statuses)
	}

	// Group 1/2: its four rollouts side by side, all dropped.
	run("group", chromedp.Click(chromedp.CSS(`#groups-table td a`)), chromedp.WaitVisible(chromedp.CSS("#rollouts")))
	type counts struct{ All, Dropped int }
	cards := evalJS[counts](t, ctx, "group", `({All: document.querySelectorAll("#rollouts .card").length, Dropped: document.querySelectorAll("#rollouts .card.dropped").length})`)
	if cards.All != 4 || cards.Dropped != 4 {
		t.Errorf("group 1/2 shows %d rollouts, %d dropped; want 4, 4", cards.All, cards.Dropped)
	}
	text("group", "#group-status", "dropped — reward_std_below_threshold (grpo)")
	run("group", shot("group"))

	// A rollout: prompt and response as text, tokens coloured by logprobs.
	run("rollout", chromedp.Click(chromedp.CSS(`#rollouts .card h3 a`)), chromedp.WaitVisible(chromedp.CSS("#tokens")))
	text("rollout", "#prompt-text", "What is 2 + 1?")
	text("rollout", "#response-text", "answer 0 of task 2")
	run("colour", chromedp.SetValue(chromedp.CSS("#color"), "logprobs"),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			// SetValue may itself fire "change", and the page then navigates:
			// fire it only while the select is there and has not been sent.
			_, err := chromedp.Evaluate[bool](`(sel => location.search.includes("color=logprobs") || !sel || sel.dispatchEvent(new Event("change")))(document.getElementById("color"))`)(ctx, tg)
			return err
		}),
		until(`location.search.includes("color=logprobs")`),
		chromedp.WaitVisible(chromedp.CSS("#tokens")))
	titles := evalJS[[]string](t, ctx, "colour", `[...document.querySelectorAll("#tokens .tok[title]")].map(s => s.className + " " + s.title)`)
	if want := "tok s3 logprobs[0] = -0.5|tok s2 logprobs[1] = -0.25|tok s10 logprobs[2] = -1.5|tok s1 logprobs[3] = -0.125"; strings.Join(titles, "|") != want {
		t.Errorf("coloured tokens %q, want %s", titles, want)
	}
	run("rollout", shot("rollout"))

	// The hostile response of rollout 0 is shown as text and runs nothing.
	run("escape", chromedp.Navigate(srv.URL+"/rollout?id=0"), chromedp.WaitVisible(chromedp.CSS("#response-text")))
	text("escape", "#response-text", hostile)
	xss := evalJS[bool](t, ctx, "escape", `window.__xss === undefined && document.querySelectorAll("main img, main script").length === 0`)
	if !xss {
		t.Error("the response's markup became elements of the page")
	}

	// Search by token ids; the result's page marks them.
	run("search", chromedp.Navigate(srv.URL+"/search"), chromedp.WaitVisible(chromedp.CSS("#search-form")),
		chromedp.SetValue(chromedp.CSS("#q"), "8 9 3"), chromedp.SetValue(chromedp.CSS("#mode"), "tokens"),
		chromedp.Submit(chromedp.CSS("#search-form")), chromedp.WaitVisible(chromedp.CSS("#results")))
	results := evalJS[int](t, ctx, "search", `document.querySelectorAll("#results tr").length - 1`)
	if results != 24 { // run 3 of every group of 8 steps
		t.Errorf("%d results for the tokens 8 9 3, want 24", results)
	}
	run("search", shot("search"))
	run("search result", chromedp.Click(chromedp.CSS(`#results td a`)), chromedp.WaitVisible(chromedp.CSS("#tokens")))
	marked := evalJS[[]string](t, ctx, "search result", `[...document.querySelectorAll("#tokens .tok.mark")].map(s => s.textContent)`)
	if strings.Join(marked, " ") != "8 9 3" {
		t.Errorf("marked tokens %q, want 8 9 3", marked)
	}

	// A table of two experiments: a series each, named by the legend and
	// on hover; the experiments table; the steps of one.
	_, exps := serveTestViewer(t, Options{Store: experimentsTable, Threads: 1})
	run("experiments", chromedp.Navigate(exps.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#plots svg circle")))
	legend := evalJS[[]string](t, ctx, "legend", `[...document.querySelectorAll("#legend .key")].map(k => k.className + " " + k.textContent)`)
	if strings.Join(legend, ",") != "key c0 a,key c1 b" {
		t.Errorf("legend %q, want a and b in two colours", legend)
	}
	plots = evalJS[[]string](t, ctx, "experiments plots", `[...document.querySelectorAll("#plots .plot")].map(p => p.querySelector("h3").textContent + ": " + [...p.querySelectorAll("path.line")].map(l => l.getAttribute("class")).join(" "))`)
	if want := "Mean reward: line c0 line c1|Reward std (over rows): line c0 line c1|Mean entropy (response tokens): line c0 line c1|Mean response length (tokens): line c0 line c1|Filtered share (dropped rollouts): line c0 line c1|Dropped groups: line c0 line c1"; strings.Join(plots, "|") != want {
		t.Errorf("plots %q, want %s", plots, want)
	}
	for i, want := range []string{"a · step 1: reward_mean = 0.75", "b · step 2: reward_mean = 0.5"} {
		tip := evalJS[string](t, ctx, "experiments hover", fmt.Sprintf(`(() => {
			const svg = document.querySelector("#plots .plot svg"), c = svg.querySelectorAll("circle")[%d].getBoundingClientRect();
			svg.dispatchEvent(new MouseEvent("mousemove", {clientX: c.x + c.width / 2, clientY: c.y + c.height / 2, bubbles: true}));
			return document.querySelector("#plots .plot .tip").textContent;
		})()`, 2*i+1))
		if tip != want {
			t.Errorf("hover tip %q, want %q", tip, want)
		}
	}
	exTable := evalJS[[]string](t, ctx, "experiments table", `[...document.querySelectorAll("#experiments-table tr")].map(tr => [...tr.cells].map(c => c.textContent).join(" "))`)
	if want := "experiment algorithm_type repeat_times learning_rate model_path project group name first_step last_step rows|a – – – – – – – 0 1 4|b – – – – – – – 0 2 4"; strings.Join(exTable, "|") != want {
		t.Errorf("experiments table %q, want %s", exTable, want)
	}
	run("experiments", shot("experiments"))
	run("experiment filter", chromedp.SetValue(chromedp.CSS("#experiment"), "b"), chromedp.Submit(chromedp.CSS("#experiment-filter")),
		until(`location.search.includes("experiment=b")`),
		chromedp.WaitVisible(chromedp.CSS("#steps-table")))
	stepRows := evalJS[[]string](t, ctx, "experiment filter", `[...document.querySelectorAll("#steps-table tr")].slice(1).map(tr => tr.cells[0].textContent + " " + tr.cells[1].textContent)`)
	if strings.Join(stepRows, ",") != "b 0,b 2" {
		t.Errorf("the steps of b: %q, want b 0, b 2", stepRows)
	}
	run("experiment filter", shot("experiment-steps"))
	t.Logf("screenshots in %s", shots)
}

// evalJS evaluates js in the page and returns its value.
func evalJS[T any](t *testing.T, ctx context.Context, step, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("%s: %v", step, err)
	}
	return v
}
