package table

import "testing"

// TestWherePrunes checks which data files a where keeps: by the experiment
// partition, exactly, and by the files' model_version ranges.
func TestWherePrunes(t *testing.T) {
	v := func(n int64) *int64 { return &n }
	files := []DataFile{
		{Path: "a0", Experiment: "a", MinVersion: v(0), MaxVersion: v(4)},
		{Path: "a1", Experiment: "a", MinVersion: v(5), MaxVersion: v(9)},
		{Path: "b0", Experiment: "b", MinVersion: v(0), MaxVersion: v(9)},
		{Path: "o", Experiment: "it's"}, // no model_version
	}
	for _, c := range []struct{ where, want string }{
		{"experiment = 'a'", "a0 a1"},
		{"experiment != 'a'", "b0 o"},
		{"experiment = 'it''s'", "o"},
		{"model_version >= 5", "a1 b0"},
		{"model_version > 4", "a1 b0"},
		{"model_version < 5", "a0 b0"},
		{"model_version <= 4", "a0 b0"},
		{"model_version = 7", "a1 b0"},
		{"model_version <> 3", "a0 a1 b0"},
		{"experiment = 'a' AND model_version >= 5", "a1"},
		{"experiment='b' and model_version>=10", ""},
	} {
		keep, err := parseWhere(c.where)
		if err != nil {
			t.Fatalf("%s: %v", c.where, err)
		}
		got := ""
		for _, f := range files {
			if keep(f) {
				if got != "" {
					got += " "
				}
				got += f.Path
			}
		}
		if got != c.want {
			t.Errorf("where %s keeps %q, want %q", c.where, got, c.want)
		}
	}
	for _, bad := range []string{"reward > 0", "experiment = 3", "model_version = 'x'", "experiment = 'a' OR experiment = 'b'", ""} {
		if _, err := parseWhere(bad); err == nil {
			t.Errorf("where %q: no error", bad)
		}
	}
}
