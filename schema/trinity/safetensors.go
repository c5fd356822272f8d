package trinity

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
)

// Tensor is one tensor of a safetensors block: its dtype name (e.g. "I32",
// "F32", "BOOL"), shape and little-endian C-order data (a slice of the
// block it was read from).
type Tensor struct {
	Dtype string
	Shape []int64
	Data  []byte
}

// dtypeRank orders dtypes as the reference implementation's Dtype enum
// (ascending); tensors are laid out by descending rank, then by name.
var dtypeRank = map[string]int{
	"BOOL": 0, "F4": 1, "F6_E2M3": 2, "F6_E3M2": 3, "U8": 4, "I8": 5, "F8_E5M2": 6,
	"F8_E4M3": 7, "F8_E8M0": 8, "I16": 9, "U16": 10, "F16": 11, "BF16": 12, "I32": 13,
	"U32": 14, "F32": 15, "C64": 16, "F64": 17, "I64": 18, "U64": 19,
}

// dtypeSize is the element size in bytes of the dtypes a reader can convert.
var dtypeSize = map[string]int64{
	"BOOL": 1, "U8": 1, "I8": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
	"I32": 4, "U32": 4, "F32": 4, "F64": 8, "I64": 8, "U64": 8, "C64": 8,
}

// maxHeader is the reference reader's limit on the JSON header length.
const maxHeader = 100_000_000

type tensorInfo struct {
	name    string
	Dtype   string
	Shape   []int64
	Offsets [2]int64
}

// parseHeader parses the JSON header: an object of tensor entries
// {"dtype": str, "shape": [int, ...], "data_offsets": [int, int]}, plus an
// optional "__metadata__" object (skipped).
func parseHeader(s string) ([]tensorInfo, error) {
	p := jsonParser{s: s}
	var out []tensorInfo
	p.space()
	if !p.word("{") {
		return nil, p.errf("want an object")
	}
	err := p.members("a tensor name", func(name string) error {
		if name == "__metadata__" {
			_, err := p.value(0)
			return err
		}
		ti, err := p.tensorEntry()
		if err != nil {
			return fmt.Errorf("tensor %q: %v", name, err)
		}
		ti.name = name
		out = append(out, ti)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, p.end()
}

func (p *jsonParser) end() error {
	p.space()
	if p.i != len(p.s) {
		return p.errf("unexpected text after the header")
	}
	return nil
}

func (p *jsonParser) tensorEntry() (tensorInfo, error) {
	var ti tensorInfo
	if !p.word("{") {
		return ti, p.errf("want an object")
	}
	seen := 0
	err := p.members("a key", func(k string) (err error) {
		switch k {
		case "dtype":
			if p.i >= len(p.s) || p.s[p.i] != '"' {
				return p.errf("dtype is not a string")
			}
			if ti.Dtype, err = p.str(); err != nil {
				return err
			}
		case "shape":
			if ti.Shape, err = p.ints(); err != nil {
				return err
			}
			if ti.Shape == nil {
				ti.Shape = []int64{}
			}
		case "data_offsets":
			offs, err := p.ints()
			if err != nil {
				return err
			}
			if len(offs) != 2 {
				return p.errf("data_offsets of %d values", len(offs))
			}
			ti.Offsets = [2]int64{offs[0], offs[1]}
		default:
			return p.errf("unknown key %q", k)
		}
		seen++
		return nil
	})
	if err != nil {
		return ti, err
	}
	if seen != 3 || ti.Shape == nil {
		return ti, p.errf("want dtype, shape and data_offsets")
	}
	return ti, nil
}

// ints parses an array of non-negative integers.
func (p *jsonParser) ints() ([]int64, error) {
	if !p.word("[") {
		return nil, p.errf("want an array")
	}
	var out []int64
	err := p.elements(func() error {
		start := p.i
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
		}
		n, err := strconv.ParseInt(p.s[start:p.i], 10, 64)
		if err != nil {
			return p.errf("want a non-negative integer")
		}
		out = append(out, n)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// readSafetensors parses a safetensors block with the reference reader's
// checks: the header lies within the block, the tensors are contiguous from
// offset 0, each holds exactly numel × dtype size bytes and the last ends at
// the end of the block. Tensor data slices b (no copy).
func readSafetensors(b []byte) (map[string]Tensor, error) {
	if len(b) < 8 {
		return nil, fmt.Errorf("tensor block of %d bytes: shorter than its 8-byte header length", len(b))
	}
	n := binary.LittleEndian.Uint64(b)
	if n > maxHeader {
		return nil, fmt.Errorf("tensor header length %d over the limit", n)
	}
	if 8+n > uint64(len(b)) {
		return nil, fmt.Errorf("tensor header length %d runs past the end of the block (%d bytes): truncated", n, len(b))
	}
	hdr, err := parseHeader(string(b[8 : 8+n]))
	if err != nil {
		return nil, fmt.Errorf("tensor header: %v", err)
	}
	data := b[8+n:]
	out := make(map[string]Tensor, len(hdr))
	type span struct {
		name   string
		lo, hi int64
	}
	spans := make([]span, 0, len(hdr))
	for _, ti := range hdr {
		name := ti.name
		size, ok := dtypeSize[ti.Dtype]
		if !ok {
			return nil, fmt.Errorf("tensor %q: unsupported dtype %q", name, ti.Dtype)
		}
		nbytes, ok := tensorBytes(ti.Shape, size, int64(len(data)))
		if !ok {
			return nil, fmt.Errorf("tensor %q: shape %v of %s needs more than the block's %d data bytes", name, ti.Shape, ti.Dtype, len(data))
		}
		lo, hi := ti.Offsets[0], ti.Offsets[1]
		if lo < 0 || hi < lo || hi-lo != nbytes {
			return nil, fmt.Errorf("tensor %q: offsets [%d, %d] do not hold %v × %s", name, lo, hi, ti.Shape, ti.Dtype)
		}
		spans = append(spans, span{name, lo, hi})
		out[name] = Tensor{Dtype: ti.Dtype, Shape: ti.Shape}
	}
	sort.Slice(spans, func(i, j int) bool {
		if spans[i].lo != spans[j].lo {
			return spans[i].lo < spans[j].lo
		}
		return spans[i].hi < spans[j].hi
	})
	var at int64
	for _, s := range spans {
		if s.lo != at {
			return nil, fmt.Errorf("tensor %q starts at %d, want %d: tensors not contiguous", s.name, s.lo, at)
		}
		at = s.hi
	}
	if at != int64(len(data)) {
		if at > int64(len(data)) {
			return nil, fmt.Errorf("tensors need %d data bytes, the block holds %d: truncated", at, len(data))
		}
		return nil, fmt.Errorf("tensors end at %d, the block holds %d data bytes", at, len(data))
	}
	for _, s := range spans {
		t := out[s.name]
		t.Data = data[s.lo:s.hi:s.hi]
		out[s.name] = t
	}
	return out, nil
}

// tensorBytes returns the size in bytes of a tensor of shape and element
// size, and false when it exceeds limit (the data a block holds): the
// product is never formed past limit, so no shape overflows it.
func tensorBytes(shape []int64, size, limit int64) (int64, bool) {
	if slices.ContainsFunc(shape, func(d int64) bool { return d < 0 }) {
		return 0, false
	}
	if slices.Contains(shape, 0) {
		return 0, true
	}
	n := size
	for _, d := range shape {
		if n > limit/d {
			return 0, false
		}
		n *= d
	}
	return n, n <= limit
}

// namedTensor is a tensor to write under a name.
type namedTensor struct {
	name string
	Tensor
}

// appendSafetensors appends a safetensors block of ts in the reference
// layout: tensors by descending dtype rank, then by name; compact JSON with
// the keys of a tensor in the order dtype, shape, data_offsets; the header
// padded with spaces to a multiple of 8.
func appendSafetensors(dst []byte, ts []namedTensor) ([]byte, error) {
	for _, t := range ts {
		if _, ok := dtypeRank[t.Dtype]; !ok {
			return nil, errors.New("unknown dtype " + t.Dtype)
		}
	}
	sort.SliceStable(ts, func(i, j int) bool {
		ri, rj := dtypeRank[ts[i].Dtype], dtypeRank[ts[j].Dtype]
		if ri != rj {
			return ri > rj
		}
		return ts[i].name < ts[j].name
	})
	hdr := []byte{'{'}
	var off int64
	for i, t := range ts {
		if i > 0 {
			hdr = append(hdr, ',')
		}
		hdr = appendJSONString(hdr, t.name, false)
		hdr = append(hdr, `:{"dtype":`...)
		hdr = appendJSONString(hdr, t.Dtype, false)
		hdr = append(hdr, `,"shape":[`...)
		for k, d := range t.Shape {
			if k > 0 {
				hdr = append(hdr, ',')
			}
			hdr = strconv.AppendInt(hdr, d, 10)
		}
		hdr = append(hdr, `],"data_offsets":[`...)
		hdr = strconv.AppendInt(hdr, off, 10)
		hdr = append(hdr, ',')
		off += int64(len(t.Data))
		hdr = strconv.AppendInt(hdr, off, 10)
		hdr = append(hdr, "]}"...)
	}
	hdr = append(hdr, '}')
	for len(hdr)%8 != 0 {
		hdr = append(hdr, ' ')
	}
	dst = binary.LittleEndian.AppendUint64(dst, uint64(len(hdr)))
	dst = append(dst, hdr...)
	for _, t := range ts {
		dst = append(dst, t.Data...)
	}
	return dst, nil
}
