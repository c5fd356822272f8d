package trinity

import (
	"reflect"
	"testing"
)

// TestMarkString: a mark without holes is written as the plain id, as every
// watermark was before holes, and reads back; one with holes as JSON.
func TestMarkString(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Mark
	}{
		{"", Mark{}},
		{"5", Mark{ID: 5}},
		{`{"id":9,"holes":[{"ids":[[2,2],[4,7]],"open":["3/12","xid 901"]}]}`,
			Mark{ID: 9, Holes: []Holes{{IDs: []IDRange{{2, 2}, {4, 7}}, Open: []string{"3/12", "xid 901"}}}}},
	} {
		m, err := ParseMark(tc.in)
		if err != nil || !reflect.DeepEqual(m, tc.want) {
			t.Errorf("ParseMark(%q) = %+v, %v; want %+v", tc.in, m, err, tc.want)
		}
		if tc.in != "" && m.String() != tc.in {
			t.Errorf("%+v.String() = %q, want %q", m, m.String(), tc.in)
		}
	}
	for _, bad := range []string{"x", `{"id":3,"holes":[{"ids":[[3,3]]}]}`, `{"id":9,"holes":[{"ids":[[5,4]]}]}`, `{"id":9,"extra":1}`} {
		if _, err := ParseMark(bad); err == nil {
			t.Errorf("ParseMark(%q) accepted", bad)
		}
	}
}

// TestWithout: the ranges less the ids read in them.
func TestWithout(t *testing.T) {
	for _, tc := range []struct {
		rs   []IDRange
		ids  []int64
		want []IDRange
	}{
		{[]IDRange{{4, 4}}, []int64{4}, nil},
		{[]IDRange{{4, 4}}, nil, []IDRange{{4, 4}}},
		{[]IDRange{{2, 9}}, []int64{2, 5, 9}, []IDRange{{3, 4}, {6, 8}}},
		{[]IDRange{{2, 3}, {7, 8}}, []int64{3, 7}, []IDRange{{2, 2}, {8, 8}}},
	} {
		if got := without(tc.rs, tc.ids); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("without(%v, %v) = %v, want %v", tc.rs, tc.ids, got, tc.want)
		}
	}
}

// TestStillOpen: a hole is kept with those of its transactions still in
// flight, dropped when none is.
func TestStillOpen(t *testing.T) {
	hs := []Holes{{IDs: []IDRange{{1, 1}}, Open: []string{"3/4", "5/6"}}, {IDs: []IDRange{{2, 2}}, Open: []string{"7/8"}}}
	want := []Holes{{IDs: []IDRange{{1, 1}}, Open: []string{"5/6"}}}
	if got := stillOpen(hs, []string{"5/6", "9/9"}); !reflect.DeepEqual(got, want) {
		t.Errorf("stillOpen = %+v, want %+v", got, want)
	}
}
