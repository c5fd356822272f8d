package registry

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/schema"
)

func TestRegistry(t *testing.T) {
	r := New[int]("widget")
	for i, n := range []string{"b", "a", "c"} {
		if err := r.Add(n, i); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Add("a", 9); err == nil {
		t.Error("duplicate Add: no error")
	}
	if got := r.Names(); !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Errorf("Names = %v", got)
	}
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
			if !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), "a, b, c") {
				t.Errorf("Get(%q) error = %v, want bad input listing names", tc.name, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Get(%q) = %v, %v", tc.name, got, err)
		}
	}
}

func TestOf(t *testing.T) {
	r := Of("widget", map[string]int{"y": 2, "x": 1})
	if got, err := r.Get("y"); err != nil || got != 2 || !reflect.DeepEqual(r.Names(), []string{"x", "y"}) {
		t.Errorf("Of: Get(y) = %v, %v; Names = %v", got, err, r.Names())
	}
}
