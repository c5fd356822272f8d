package registry

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/args"
)

func widgets() []Spec[int] {
	return []Spec[int]{
		{Name: "b", Doc: "bee", New: 0},
		{Name: "a", Doc: "ay", Params: args.Schema{{Name: "x", Kind: args.Float, Default: 2.0, InDefaults: true}}, New: 1},
		{Name: "c", New: 2},
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		specs   []Spec[int]
		wantErr string
	}{
		{"distinct", widgets(), ""},
		{"twice", append(widgets(), Spec[int]{Name: "a"}), `widget "a" registered twice`},
		{"unnamed", []Spec[int]{{Doc: "no name"}}, "widget without a name"},
	}
	for _, tc := range tests {
		r, err := New("widget", tc.specs...)
		if tc.wantErr == "" {
			if err != nil || !reflect.DeepEqual(r.Names(), []string{"a", "b", "c"}) {
				t.Errorf("%s: New = %v, %v", tc.name, r, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.wantErr)
		}
	}
}

func TestGet(t *testing.T) {
	r := Must("widget", widgets()...)
	tests := []struct {
		name    string
		want    int
		wantErr bool
	}{
		{"a", 1, false},
		{"c", 2, false},
		{"zz", 0, true},
	}
	for _, tc := range tests {
		got, err := r.Get(tc.name)
		if tc.wantErr {
			if !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), `unknown widget "zz" (valid: a, b, c)`) {
				t.Errorf("Get(%q) error = %v, want bad input naming the family and listing names", tc.name, err)
			}
			if _, err := r.Entry(tc.name); err == nil {
				t.Errorf("Entry(%q): no error", tc.name)
			}
			continue
		}
		if err != nil || got.New != tc.want || got.Name != tc.name {
			t.Errorf("Get(%q) = %+v, %v", tc.name, got, err)
		}
	}
	if d := Must("widget", widgets()...).specs["a"].Defaults(); d["x"] != 2.0 {
		t.Errorf("Defaults = %v", d)
	}
}

func TestEntries(t *testing.T) {
	var f Family = Must("widget", widgets()...)
	es := f.Entries()
	if len(es) != 3 || es[0].Name != "a" || es[0].Doc != "ay" || es[1].Doc != "bee" || es[2].Name != "c" {
		t.Errorf("Entries = %+v", es)
	}
	if p, err := f.Params("a"); err != nil || !reflect.DeepEqual(p.Names(), []string{"x"}) {
		t.Errorf("Params(a) = %v, %v", p, err)
	}
}

// TestImmutable: what a registry hands out cannot change it, and With
// leaves it as it was.
func TestImmutable(t *testing.T) {
	r := Must("widget", widgets()...)
	r.Names()[0] = "zz"
	s, _ := r.Get("a")
	s.New = 9
	if got, _ := r.Get("a"); got.New != 1 || r.Names()[0] != "a" {
		t.Errorf("registry changed through what it returned: %v, %+v", r.Names(), got)
	}
	r2, err := r.With(Spec[int]{Name: "d", New: 3})
	if err != nil || !reflect.DeepEqual(r2.Names(), []string{"a", "b", "c", "d"}) || len(r.Names()) != 3 {
		t.Errorf("With: %v, %v; original %v", r2.Names(), err, r.Names())
	}
	if _, err := r.With(Spec[int]{Name: "b"}); err == nil {
		t.Error("With a registered name: no error")
	}
}
