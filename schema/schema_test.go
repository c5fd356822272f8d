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

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgresql://u:s3cr3t@h:5432/db?table=t", "postgresql://u:xxxxx@h:5432/db?table=t"},
		{"postgres://u@h/db?table=t&password=s3cr3t&sslmode=disable", "postgres://u@h/db?table=t&password=xxxxx&sslmode=disable"},
		{"postgresql://u:pa/ss?x@h/db?table=t", "postgresql://u:xxxxx@h/db?table=t"},
		{"postgresql://u:p@ss@h/db", "postgresql://u:xxxxx@h/db"},
		{`parse "postgresql://u:s3cr3t@h:x/db": invalid port`, `parse "postgresql://u:xxxxx@h:x/db": invalid port`},
		{"a postgresql://u:one@h/a -> postgresql://v:two@h/b", "a postgresql://u:xxxxx@h/a -> postgresql://v:xxxxx@h/b"},
		{"sqlite:////tmp/b.db?table=t", "sqlite:////tmp/b.db?table=t"},
		{"postgresql://u@h/db", "postgresql://u@h/db"},
		{"in.parquet: row 3: bad", "in.parquet: row 3: bad"},
	} {
		if got := Redact(tc.in); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	err := Errorf("postgresql://u:s3cr3t@h/db?table=t", 2, "reward", "see postgresql://u:s3cr3t@h/db")
	if strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("InputError shows the password: %q", err)
	}
	// A store's URL is one name: a quote or space in its password does not
	// end it.
	for _, pw := range []string{`pa'ss`, `pa"ss`, "pa ss", "pa`ss"} {
		u := "postgresql://u:" + pw + "@h/db?table=t"
		if got := RedactURL(u); got != "postgresql://u:xxxxx@h/db?table=t" {
			t.Errorf("RedactURL(%q) = %q", u, got)
		}
		if err := Errorf(u, -1, "", "bad URL"); strings.Contains(err.Error(), "pa") {
			t.Errorf("InputError shows the password: %q", err)
		}
	}
}

func FuzzRedact(f *testing.F) {
	for _, s := range []string{"postgresql://u:pw@h/db?table=t", "x postgresql://u:pw@h/db?password=pw y", "sqlite:///a.db?table=t"} {
		f.Add(s, "pw")
	}
	f.Fuzz(func(t *testing.T, prefix, pw string) {
		if pw == "" || strings.ContainsAny(pw, " \t\n\"'`:@&") || strings.Contains(prefix+pw, "xxxxx") {
			return
		}
		// The output must not depend on the password.
		urls := func(pw string) []string {
			return []string{"postgresql://user:" + pw + "@host/db?table=t", "postgresql://user@host/db?table=t&password=" + pw}
		}
		other := urls("other")
		for i, u := range urls(pw) {
			if got, want := Redact(prefix+" "+u), Redact(prefix+" "+other[i]); got != want {
				t.Errorf("Redact(%q) = %q, want %q", prefix+" "+u, got, want)
			}
		}
	})
}

// TestRoutingData: a routed_experts value is routing data unless its row is
// prompt-truncated (Trinity's placeholder); a null value never is.
func TestRoutingData(t *testing.T) {
	mem := memory.DefaultAllocator
	rb := array.NewInt16Builder(mem)
	rb.AppendValues([]int16{1, 2, 3, 4}, nil)
	rb.AppendNull()
	routed := rb.NewArray()
	defer routed.Release()
	sb := array.NewStringBuilder(mem)
	sb.AppendValues([]string{"", "prompt_truncated", "response_truncated", ""}, []bool{false, true, true, true})
	sb.Append("prompt_truncated")
	status := sb.NewStringArray()
	defer status.Release()
	for _, tc := range []struct {
		routed arrow.Array
		status *array.String
		want   []bool
	}{
		{routed, status, []bool{true, false, true, true, false}},
		{routed, nil, []bool{true, true, true, true, false}},
		{nil, status, []bool{false, false, false, false, false}},
	} {
		for i, want := range tc.want {
			if got := RoutingData(tc.routed, tc.status, i); got != want {
				t.Errorf("routed %v, status %v, row %d: %v, want %v", tc.routed != nil, tc.status != nil, i, got, want)
			}
		}
	}
}
