package report

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden pages in testdata/")

// stampRE matches the page's generation time and duration, which differ
// from run to run.
var stampRE = regexp.MustCompile(`generated [^<]* in [^<]*</p>`)

// TestReportGolden renders stores of one experiment (or none) and compares
// the page, generation time and duration aside, with testdata/NAME.html.
func TestReportGolden(t *testing.T) {
	for _, c := range []struct{ name, store string }{
		{"demo", demo},
		{"one-experiment", "../../fixtures/tables/experiments?where=experiment = 'a'"},
	} {
		t.Run(c.name, func(t *testing.T) {
			page := stampRE.ReplaceAllString(render(t, Options{Store: c.store, Threads: 2}), "generated … in …</p>")
			path := filepath.Join("testdata", c.name+".html")
			if *update {
				if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if page != string(want) {
				t.Errorf("the page differs from %s (go test -run TestReportGolden -update rewrites it)", path)
			}
		})
	}
}
