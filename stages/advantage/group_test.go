package advantage

import (
	"errors"
	"slices"
	"testing"

	"github.com/rftpipe/rftpipe/schema"
)

func TestGroupBy(t *testing.T) {
	tests := []struct {
		name string
		keys []string
		off  []int32
		rows []int32
	}{
		{"empty", nil, []int32{0}, []int32{}},
		{"first appearance", []string{"0/1", "0/0", "0/1", "0/2", "0/0"}, []int32{0, 2, 4, 5}, []int32{0, 2, 1, 4, 3}},
		// int 0 and string "0" render alike.
		{"int and string ids", []string{TID("0", "0"), TID("0", "1"), TID("0", "0")}, []int32{0, 2, 3}, []int32{0, 2, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := GroupBy(tc.keys)
			if !slices.Equal(g.Off, tc.off) || !slices.Equal(g.Rows, tc.rows) {
				t.Fatalf("got off %v rows %v, want %v %v", g.Off, g.Rows, tc.off, tc.rows)
			}
			ids := g.IDOf(len(tc.keys))
			for i, id := range ids {
				if !slices.Contains(g.Group(int(id)), int32(i)) {
					t.Errorf("IDOf[%d] = %d, group does not hold the row", i, id)
				}
			}
		})
	}
}

func TestGroupByIDsErrors(t *testing.T) {
	tests := []struct {
		name string
		ids  []int32
		n    int
	}{
		{"out of range", []int32{0, 2}, 2},
		{"negative", []int32{-1}, 1},
		{"not first-appearance order", []int32{1, 0}, 2},
		{"declared but unused", []int32{0, 0}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := GroupByIDs(tc.ids, tc.n); !errors.Is(err, schema.ErrBadInput) {
				t.Fatalf("got %v, want a bad-input error", err)
			}
		})
	}
}

func TestKeys(t *testing.T) {
	tests := []struct{ got, want string }{
		{TID("3", "7"), "3/7"},
		{RID("3", "abc", 2), "3/abc/2"},
		{SID("", "", 0), "//0"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
