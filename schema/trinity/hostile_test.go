package trinity

import (
	"bytes"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rftpipe/rftpipe/schema"
)

// Hand-written pickle opcodes for the hostile payloads below.

// str is BINUNICODE s (s's bytes as they are).
func str(s string) []byte {
	b := binary.LittleEndian.AppendUint32([]byte{opBinUnicode}, uint32(len(s)))
	return append(b, s...)
}

// itemPickle is the protocol-2 pickle of {"version": 1, "num_items": 1,
// "items": [{key: value}]}, value given as opcodes (its memo entries are
// numbered from 0).
func itemPickle(key string, value []byte) []byte {
	b := []byte{opProto, 2, opEmptyDict, opMark}
	b = append(append(b, str("version")...), opBinInt1, 1)
	b = append(append(b, str("num_items")...), opBinInt1, 1)
	b = append(append(b, str("items")...), opEmptyList, opEmptyDict, opMark)
	b = append(append(b, str(key)...), value...)
	return append(b, opSetItems, opAppend, opSetItems, opStop)
}

// trxp wraps a pickle and a tensor block in the TRXP container.
func trxp(meta, block []byte) []byte {
	b := append([]byte(magic), version)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(meta)))
	b = binary.LittleEndian.AppendUint64(b, uint64(len(block)))
	return append(append(b, meta...), block...)
}

// safetensorsBlock is a block whose JSON header is hdr and data data.
func safetensorsBlock(hdr string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	return append(append(b, hdr...), data...)
}

// repeat is n copies of op.
func repeat(op []byte, n int) []byte { return bytes.Repeat(op, n) }

// memoBomb is a list of 10 references to a list of 10 references … (levels
// deep) to a 200-byte str, as Python pickles [[["x" * 200] * 10] * 10]:
// a few hundred bytes that spell out 10^levels × 200 bytes of text. The
// list d deep is memo entry d, the str entry levels.
func memoBomb(levels int) []byte {
	var at func(d int) []byte
	at = func(d int) []byte {
		if d == levels {
			return append(str(strings.Repeat("x", 200)), opMemoize)
		}
		b := append([]byte{opEmptyList, opMemoize, opMark}, at(d+1)...)
		b = append(b, repeat([]byte{opBinGet, byte(d + 1)}, 9)...)
		return append(b, opAppends)
	}
	return at(0)
}

// manyKeys is a dict of n keys key(i): 0.
func manyKeys(n int, key func(i int) []byte) []byte {
	b := []byte{opEmptyDict, opMark}
	for i := 0; i < n; i++ {
		b = append(append(b, key(i)...), opBinInt1, 0)
	}
	return append(b, opSetItems)
}

// hostileBuffer copies experience.db with row 1's payload replaced by blob.
func hostileBuffer(t *testing.T, blob []byte) string {
	t.Helper()
	src, err := os.ReadFile(fixtures + "/experience.db")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "hostile.db")
	if err := os.WriteFile(path, src, 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("UPDATE experience_buffer SET experience_bytes = ? WHERE id = 1", blob); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(path)
	return "sqlite:///" + abs + "?table=experience_buffer"
}

// readAll reads a buffer table to its end through Open, on its own
// goroutine: a read that has not ended within a minute fails the test
// (the decoder is meant to take milliseconds; the minute only tells a
// bounded read from a runaway one). It returns the read's error and the
// bytes the read allocated.
func readAll(t *testing.T, url string) (error, uint64) {
	t.Helper()
	type result struct {
		err   error
		alloc uint64
	}
	done := make(chan result, 1)
	go func() {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := func() error {
			r, err := Open(url, ReadOptions{BatchRows: 8})
			if err != nil {
				return err
			}
			defer r.Close()
			for {
				if _, err := r.Next(); err == io.EOF {
					return nil
				} else if err != nil {
					return err
				}
			}
		}()
		runtime.ReadMemStats(&after)
		done <- result{err, after.TotalAlloc - before.TotalAlloc}
	}()
	select {
	case res := <-done:
		return res.err, res.alloc
	case <-time.After(time.Minute):
		t.Fatal("the read did not end within a minute")
		return nil, 0
	}
}

// TestHostilePayloads: a payload built to exhaust the decoder — a value
// that holds itself, memo references that spell out gigabytes, nesting a
// recursive walk cannot take, a huge int, a tensor whose shape × dtype
// size overflows — is refused as bad input naming the table, the row id
// and the field, in bounded time and memory; a dict of many keys is built
// in linear time.
func TestHostilePayloads(t *testing.T) {
	fixture := fixtureRows(t, "experience.db", "experience_buffer", KindExperience)[0].blob
	block := tensorBlock(t, fixture)
	const i32Huge = `{"0:tokens":{"dtype":"I32","shape":[4611686018427387904],"data_offsets":[0,0]}}`
	for _, tc := range []struct {
		name  string
		blob  []byte
		field string // "" when the row is read
		msg   string
	}{
		{"list holding itself", trxp(itemPickle("messages", []byte{opEmptyList, opMemoize, opBinGet, 0, opAppend}), block),
			"messages", "a list that contains itself"},
		{"dict holding itself", trxp(itemPickle("info", append(append([]byte{opEmptyDict, opMemoize}, str("self")...), opBinGet, 0, opSetItem)), block),
			"info", "a dict that contains itself"},
		{"list holding itself through a tuple", trxp(itemPickle("tools", []byte{opEmptyList, opMemoize, opBinGet, 0, opTuple1, opAppend}), block),
			"tools", "a list that contains itself"},
		{"memo references spelling out 200 GB", trxp(itemPickle("messages", memoBomb(9)), block),
			"messages", "expands (memo references) to more than 16× the pickle's size"},
		{"100,000 nested lists", trxp(itemPickle("messages", append(repeat([]byte{opEmptyList}, 100_000), repeat([]byte{opAppend}, 99_999)...)), block),
			"messages", "nests lists, dicts and tuples more than 512 deep"},
		{"an int of 1 MB", trxp(itemPickle("tools", append(binary.LittleEndian.AppendUint32([]byte{opLong4}, 1<<20), bytes.Repeat([]byte{0x7f}, 1<<20)...)), block),
			"tools", "an int of 1048576 bytes"},
		{"a memo index far ahead", trxp(itemPickle("info", []byte{opEmptyDict, opLongBinPut, 0xff, 0xff, 0xff, 0x00}), block),
			ColumnPayload, "memo index 16777215 out of order"},
		{"shape × dtype size overflowing int64", trxp(itemPickle("prompt_length", []byte{opBinInt1, 1}), safetensorsBlock(i32Huge, nil)),
			ColumnPayload, `tensor "0:tokens": shape [4611686018427387904] of I32 needs more than the block's 0 data bytes`},
		{"200,000 int keys", trxp(itemPickle("info", manyKeys(200_000, func(i int) []byte {
			return binary.LittleEndian.AppendUint32([]byte{opBinInt}, uint32(i))
		})), block), "info", "dict key 0 (int64) has no JSON form"},
		{"200,000 str keys", trxp(itemPickle("info", manyKeys(200_000, func(i int) []byte { return str(fmt.Sprint("k", i)) })), block),
			"", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err, alloc := readAll(t, hostileBuffer(t, tc.blob))
			if tc.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("read without error")
			}
			var ie *schema.InputError
			if !errors.Is(err, schema.ErrBadInput) || !errors.As(err, &ie) || ie.Column != tc.field {
				t.Errorf("error %q: want bad input in column %q", err, tc.field)
			}
			for _, w := range []string{"table experience_buffer, id 1:", tc.msg} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			// The bound: decoding never holds more than a constant times
			// the payload, plus the fixed budget and the read's own buffers.
			if limit := uint64(64*len(tc.blob)) + 64<<20; alloc > limit {
				t.Errorf("the read allocated %d bytes for a %d-byte payload (over %d)", alloc, len(tc.blob), limit)
			}
		})
	}
}
