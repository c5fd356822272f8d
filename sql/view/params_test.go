package view

import (
	"net/url"
	"testing"
)

// TestExperimentParam: the experiment parameter picks one of the store's
// experiments, "" included where the store has rows of no experiment (the
// links of their groups carry experiment=), and is required on a group page
// of a store of several.
func TestExperimentParam(t *testing.T) {
	for _, c := range []struct {
		name        string
		experiments []string
		query       string
		required    bool
		want        string
		bad         bool
	}{
		{"none given, one experiment", []string{""}, "", true, "", false},
		{"none given, several, optional", []string{"a", "b"}, "", false, "", false},
		{"none given, several, required", []string{"a", "b"}, "", true, "", true},
		{"one of them", []string{"a", "b"}, "experiment=b", true, "b", false},
		{"rows of no experiment", []string{"", "a", "b"}, "experiment=", true, "", false},
		{"empty where every row has one", []string{"a", "b"}, "experiment=", true, "", true},
		{"unknown", []string{"", "a", "b"}, "experiment=c", false, "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			q, err := url.ParseQuery(c.query)
			if err != nil {
				t.Fatal(err)
			}
			got, err := (&Viewer{experiments: c.experiments}).experiment(params{q}, c.required)
			if (err != nil) != c.bad || got != c.want {
				t.Errorf("got %q, %v; want %q, refused %v", got, err, c.want, c.bad)
			}
		})
	}
}
