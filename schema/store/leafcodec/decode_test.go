package leafcodec

import (
	"encoding/binary"
	"math/rand/v2"
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

// TestDecodeHybridPacked: bit-packed runs of many groups, at every width 1
// to 32, with the values wanted ending inside a group or before the run's
// last group, against a bit-by-bit reading of the same bytes.
func TestDecodeHybridPacked(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for width := 1; width <= 32; width++ {
		for _, groups := range []int{1, 2, 7, 33} {
			packed := make([]byte, groups*width)
			for i := range packed {
				packed[i] = byte(rng.Uint32())
			}
			src := append(binary.AppendUvarint(nil, uint64(groups)<<1|1), packed...)
			for _, n := range []int{groups * 8, groups*8 - 3, max(groups*8-9, 1)} {
				want := make([]int32, n)
				for i := range want {
					var v uint64
					for b := 0; b < width; b++ {
						bit := i*width + b
						v |= uint64(packed[bit/8]>>(bit%8)&1) << b
					}
					want[i] = int32(v)
				}
				got := make([]int32, n)
				if err := decodeHybrid(got, src, width); err != nil || !slices.Equal(got, want) {
					t.Fatalf("width %d, %d groups, %d values: got %v, %v; want %v", width, groups, n, got, err, want)
				}
				if width <= 15 {
					got16 := make([]int16, n)
					if err := decodeHybrid(got16, src, width); err != nil {
						t.Fatal(err)
					}
					for i := range got16 {
						if int32(got16[i]) != want[i] {
							t.Fatalf("int16, width %d, %d groups: value %d is %d, want %d", width, groups, i, got16[i], want[i])
						}
					}
				}
			}
		}
	}
}

// TestRunEndCountEqual: the word-at-a-time scans agree with a level-by-level
// one on runs of every length and alignment.
func TestRunEndCountEqual(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 500; trial++ {
		levels := make([]int16, rng.IntN(40))
		for i := range levels {
			if rng.IntN(6) == 0 {
				levels[i] = int16(rng.IntN(3))
			} else {
				levels[i] = 1
			}
		}
		for _, v := range []int16{0, 1, 2} {
			want := 0
			for _, l := range levels {
				if l == v {
					want++
				}
			}
			if got := countEqual(levels, v); got != want {
				t.Fatalf("countEqual(%v, %d) = %d, want %d", levels, v, got, want)
			}
			for i := 0; i <= len(levels); i++ {
				end := i + rng.IntN(len(levels)-i+1)
				want := i
				for want < end && levels[want] == v {
					want++
				}
				if got := runEnd(levels, i, end, v); got != want {
					t.Fatalf("runEnd(%v, %d, %d, %d) = %d, want %d", levels, i, end, v, got, want)
				}
			}
		}
	}
}

// TestHybridReaderParts: a stream of RLE runs and bit-packed runs read in
// parts of every size (ending inside a group, inside a run, at a run's end)
// gives the values of the stream decoded at once, and countLevels counts
// them as the values decoded do.
func TestHybridReaderParts(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, width := range []int{1, 2, 3, 9} {
		var src []byte
		var want []int16
		for r := 0; r < 40; r++ {
			if rng.IntN(2) == 0 {
				n, v := 1+rng.IntN(30), int16(rng.IntN(1<<width))
				src = binary.AppendUvarint(src, uint64(n)<<1)
				for b := 0; b < (width+7)/8; b++ {
					src = append(src, byte(v>>(8*b)))
				}
				want = append(want, slices.Repeat([]int16{v}, n)...)
				continue
			}
			groups := 1 + rng.IntN(4)
			src = binary.AppendUvarint(src, uint64(groups)<<1|1)
			packed := make([]byte, groups*width)
			for i := range packed {
				packed[i] = byte(rng.Uint32())
			}
			src = append(src, packed...)
			for i := 0; i < groups*8; i++ {
				var v int16
				for b := 0; b < width; b++ {
					bit := i*width + b
					v |= int16(packed[bit/8]>>(bit%8)&1) << b
				}
				want = append(want, v)
			}
		}
		want = want[:len(want)-3] // the stream's values end inside its last run
		for _, part := range []int{1, 3, 7, 8, 13, 64, len(want)} {
			h := newHybridReader[int16](src, width, len(want))
			n, err := countLevels(h, 1, make([]int16, part))
			if wantN := countEqual(want, 1); err != nil || n != wantN {
				t.Fatalf("width %d, parts of %d: counted %d, %v; want %d", width, part, n, err, wantN)
			}
			got := make([]int16, len(want))
			for i := 0; i < len(got); i += part {
				if err := h.read(got[i:min(i+part, len(got))]); err != nil {
					t.Fatalf("width %d, parts of %d, at %d: %v", width, part, i, err)
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("width %d, parts of %d: got %v, want %v", width, part, got, want)
			}
			if err := h.read(got[:1]); err == nil {
				t.Fatalf("width %d: read past the stream's values", width)
			}
		}
	}
}
