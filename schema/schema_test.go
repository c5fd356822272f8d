package schema

import (
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
)

func TestRequire(t *testing.T) {
	s := arrow.NewSchema([]arrow.Field{
		{Name: Task, Type: arrow.BinaryTypes.String},
		{Name: Run, Type: arrow.PrimitiveTypes.Int64},
		{Name: Reward, Type: arrow.BinaryTypes.String},
		{Name: Logprobs, Type: arrow.LargeListOf(arrow.PrimitiveTypes.Float32)},
		{Name: "extra", Type: arrow.BinaryTypes.String},
	}, nil)
	tests := []struct {
		cols []string
		want string // "" = ok
	}{
		{[]string{Task, Run, Logprobs, "extra"}, ""},
		{[]string{Batch}, `column "batch": missing required column (store has: extra, logprobs, reward, run, task)`},
		{[]string{Reward}, `column "reward": has type utf8, want float64`},
	}
	for _, tc := range tests {
		err := Require("s.parquet", s, tc.cols...)
		if tc.want == "" {
			if err != nil {
				t.Errorf("Require(%v) = %v", tc.cols, err)
			}
			continue
		}
		if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), "s.parquet: "+tc.want) {
			t.Errorf("Require(%v) = %v, want %q", tc.cols, err, tc.want)
		}
	}
}

func TestKeysRenderIntAndStringAlike(t *testing.T) {
	mem := memory.DefaultAllocator
	ib := array.NewInt64Builder(mem)
	ib.AppendValues([]int64{0, 12}, nil)
	sb := array.NewStringBuilder(mem)
	sb.AppendValues([]string{"0", "12"}, nil)
	ints, strs := ib.NewArray(), sb.NewArray()
	for i := 0; i < 2; i++ {
		a := string(AppendKey(nil, i, ints, ints))
		b := string(AppendKey(nil, i, strs, strs))
		if a != b {
			t.Errorf("row %d: %q != %q", i, a, b)
		}
	}
	if got := string(AppendKey(nil, 1, ints, strs)); got != "2:12/12" {
		t.Errorf("key = %q", got)
	}
}

// TestKeysUnambiguous: ids holding the separator never make two groups one.
func TestKeysUnambiguous(t *testing.T) {
	str := func(v ...string) arrow.Array {
		b := array.NewStringBuilder(memory.DefaultAllocator)
		b.AppendValues(v, nil)
		return b.NewArray()
	}
	batch, task, run := str("0", "0/a", "", "/", "1:0"), str("a/b", "b", "/", "", "a"), str("r", "r", "r", "r", "r")
	seen := map[string]int{}
	for i := 0; i < batch.Len(); i++ {
		for _, cols := range [][]arrow.Array{{batch, task}, {batch, task, run}} {
			k := string(AppendKey(nil, i, cols...))
			if j, dup := seen[k]; dup {
				t.Errorf("rows %d and %d share key %q", j, i, k)
			}
			seen[k] = i
		}
	}
}

func TestErrorFormat(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{Errorf("f.parquet", 3, "reward", "reward is NaN"), `f.parquet: row 3: column "reward": reward is NaN`},
		{Errorf("f.parquet", -1, "", "empty"), `f.parquet: empty`},
		{BadInputf("unknown fn %q", "x"), `unknown fn "x"`},
		{&InputError{File: "f", Row: -1, Msg: "bad", Err: errors.New("line1\nline2")}, "f: bad: line1 …"},
	}
	for _, tc := range tests {
		if tc.err.Error() != tc.want || !errors.Is(tc.err, ErrBadInput) {
			t.Errorf("got %q, want %q (bad input)", tc.err, tc.want)
		}
	}
}
