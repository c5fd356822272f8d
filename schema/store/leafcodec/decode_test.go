package leafcodec

import (
	"slices"
	"testing"
)

// TestDecodeHybrid: RLE runs and bit-packed groups of Parquet's hybrid
// encoding, at the widths levels and dictionary indices use, and inputs
// that end early.
func TestDecodeHybrid(t *testing.T) {
	for _, tc := range []struct {
		name  string
		src   []byte
		width int
		want  []int32 // nil: an error
	}{
		{"rle run", []byte{3 << 1, 1}, 1, []int32{1, 1, 1}},
		{"rle run cut to the values wanted", []byte{9 << 1, 2}, 2, []int32{2, 2, 2, 2}},
		{"bit-packed, width 1", []byte{1<<1 | 1, 0b10110001}, 1, []int32{1, 0, 0, 0, 1, 1, 0, 1}},
		{"bit-packed, width 2", []byte{1<<1 | 1, 0b11100100, 0b00011011}, 2, []int32{0, 1, 2, 3, 3, 2, 1, 0}},
		{"run then group", []byte{2 << 1, 3, 1<<1 | 1, 0b00000101, 0}, 2, []int32{3, 3, 1, 1, 0, 0}},
		{"two-byte run value, width 12", []byte{2 << 1, 0x34, 0x02}, 12, []int32{0x234, 0x234}},
		{"width 0 (one-value dictionary)", []byte{5 << 1}, 0, []int32{0, 0, 0, 0, 0}},
		{"no header", []byte{}, 1, nil},
		{"run without its value", []byte{3 << 1}, 1, nil},
		{"group past the end", []byte{2<<1 | 1, 0xff}, 1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := len(tc.want)
			if tc.want == nil {
				n = 4
			}
			got := make([]int32, n)
			err := decodeHybrid(got, tc.src, tc.width)
			if tc.want == nil {
				if err == nil {
					t.Fatalf("decoded %v from a cut input", got)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
