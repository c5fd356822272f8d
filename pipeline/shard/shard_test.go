package shard

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/agg"
)

// TestNewRefusesAsUsage: a shard count or index out of range is a usage
// error (the command line's --shards and --shard), said as such.
func TestNewRefusesAsUsage(t *testing.T) {
	for _, c := range []struct {
		n, i int
		want string
	}{
		{0, 0, "usage: --shards 0 is outside its valid range [1,10000]"},
		{MaxShards + 1, 0, "usage: --shards 10001 is outside its valid range [1,10000]"},
		{2, 5, "usage: shard index 5 is out of range: 2 shards are numbered 0 to 1"},
		{2, -1, "usage: shard index -1 is out of range: 2 shards are numbered 0 to 1"},
	} {
		_, err := New(c.n, c.i)
		if !errors.Is(err, schema.ErrUsage) || err.Error() != c.want {
			t.Errorf("New(%d, %d) = %v, want a usage error %q", c.n, c.i, err, c.want)
		}
	}
	if s, err := New(2, 1); err != nil || s != (Shard{N: 2, I: 1}) {
		t.Errorf("New(2, 1) = %v, %v", s, err)
	}
}

// TestOf pins the batch → shard map: FNV-1a 64 of the key's rendering, mod
// N (values from the FNV-1a definition: offset 0xcbf29ce484222325, prime
// 0x100000001b3). Changing it would scatter the batches of running jobs.
func TestOf(t *testing.T) {
	for _, c := range []struct {
		key  string
		n    int
		want int
	}{
		{"", 7, int(uint64(0xcbf29ce484222325) % 7)},
		{"a", 1000, int(uint64(0xaf63dc4c8601ec8c) % 1000)},
		{"0", 8, int(uint64(0xaf63ad4c86019caf) % 8)},
		{"batch-17", 1, 0},
	} {
		if got := Of([]byte(c.key), c.n); got != c.want {
			t.Errorf("Of(%q, %d) = %d, want %d", c.key, c.n, got, c.want)
		}
	}
	s := Shard{N: 8, I: Of([]byte("42"), 8)}
	if !s.HoldsInt(42) || !s.Holds([]byte("42")) {
		t.Error("42 and \"42\" fall in different shards")
	}
}

// TestRows: integer and string batch ids that render alike go to the same
// shard, and every row goes to exactly one shard.
func TestRows(t *testing.T) {
	ib := array.NewInt64Builder(memory.DefaultAllocator)
	sb := array.NewStringBuilder(memory.DefaultAllocator)
	for v := int64(0); v < 50; v++ {
		ib.Append(v)
		sb.Append(string(rune('0'+v/10)) + string(rune('0'+v%10)))
	}
	ints, strs := ib.NewArray(), sb.NewArray()
	defer ints.Release()
	defer strs.Release()
	seen := make([]int, 50)
	for i := 0; i < 3; i++ {
		for _, r := range (Shard{N: 3, I: i}).Rows(ints, nil) {
			seen[r]++
		}
	}
	for r, n := range seen {
		if n != 1 {
			t.Fatalf("row %d in %d shards", r, n)
		}
	}
	one := Shard{N: 5, I: Of([]byte("7"), 5)}
	if got := one.Rows(ints, nil); len(got) == 0 || !one.HoldsInt(7) {
		t.Fatalf("shard of 7 holds %v", got)
	}
}

func part(i, n int, m, w agg.Metrics) *Part {
	return NewPart(Shard{N: n, I: i}, "job", "plan", 10, time.Duration(i+1)*time.Second, m, w)
}

// TestMerge: counts add, means weigh by their weights, max and min combine,
// timings take the slowest part, a NaN mean (over nothing) is skipped, and
// missing parts are listed.
func TestMerge(t *testing.T) {
	parts := []*Part{
		part(0, 4, agg.Metrics{"x_count": 3, "g/a/mean": 0.5, "g/a/max": 2, "g/a/min": -1, "time/total": 4, "ratio": math.NaN(), "critic/kl_coef": 0.1},
			agg.Metrics{"g/a/mean": 2, "ratio": 0}),
		part(2, 4, agg.Metrics{"x_count": 4, "g/a/mean": 2, "g/a/max": 1, "g/a/min": -3, "time/total": 1, "ratio": 0.25, "critic/kl_coef": 0.1},
			agg.Metrics{"g/a/mean": 6, "ratio": 4}),
	}
	m, err := Merge(parts)
	if err != nil {
		t.Fatal(err)
	}
	want := agg.Metrics{"x_count": 7, "g/a/mean": (0.5*2 + 2*6) / 8, "g/a/max": 2, "g/a/min": -3, "time/total": 4, "ratio": 0.25, "critic/kl_coef": 0.1}
	for k, v := range want {
		if m.Metrics[k] != v {
			t.Errorf("%s = %v, want %v", k, m.Metrics[k], v)
		}
	}
	if len(m.Metrics) != len(want) || len(m.Missing) != 2 || m.Missing[0] != 1 || m.Missing[1] != 3 || m.Duration != 3*time.Second {
		t.Errorf("merged %v, missing %v, duration %v", m.Metrics, m.Missing, m.Duration)
	}
	// Parts of different shard counts, and settings that differ, are errors.
	if _, err := Merge([]*Part{part(0, 2, agg.Metrics{}, nil), part(1, 3, agg.Metrics{}, nil)}); err == nil {
		t.Error("parts of 2 and 3 shards merged")
	}
	if _, err := Merge([]*Part{part(0, 2, agg.Metrics{"c": 1}, nil), part(1, 2, agg.Metrics{"c": 2}, nil)}); err == nil {
		t.Error("differing settings merged")
	}
	// Parts of different jobs, and shard counts past MaxShards (which would
	// list 10^11 missing parts), are refused, naming them.
	other := part(1, 2, agg.Metrics{}, nil)
	other.Label = "ppo"
	if _, err := Merge([]*Part{part(0, 2, agg.Metrics{}, nil), other}); err == nil || !strings.Contains(err.Error(), `part 0 is of job "job", part 1 of job "ppo"`) {
		t.Errorf("parts of two jobs: %v", err)
	}
	huge := part(0, 2, agg.Metrics{}, nil)
	huge.Shards = 100000000000
	if _, err := Merge([]*Part{huge}); err == nil || !strings.Contains(err.Error(), "shard 0 of 100000000000") {
		t.Errorf("a part of 10^11 shards: %v", err)
	}
	bad := part(0, 2, agg.Metrics{}, nil)
	bad.Shard = 5
	if _, err := Merge([]*Part{bad}); err == nil {
		t.Error("shard 5 of 2 merged")
	}
}

// TestWriteAndMergeDir round-trips parts through their files.
func TestWriteAndMergeDir(t *testing.T) {
	dir := t.TempDir()
	for i := 0; i < 2; i++ {
		if err := part(i, 2, agg.Metrics{"n_count": float64(i + 1), "v": math.Inf(1)}, nil).Write(context.Background(), dir); err != nil {
			t.Fatal(err)
		}
	}
	m, err := MergeDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Metrics["n_count"] != 3 || !math.IsNaN(m.Metrics["v"]) || len(m.Missing) != 0 || m.Label != "job" {
		t.Fatalf("%+v", m)
	}
	if _, err := MergeDir(t.TempDir()); err == nil {
		t.Fatal("an empty directory merged")
	}
}

// TestPlanHidesPasswords: a plan over a database URL records no password,
// whatever it holds (a / or a quote, a password parameter).
func TestPlanHidesPasswords(t *testing.T) {
	for _, in := range []string{"postgresql://u:se/cret@db/x?table=t", "postgresql://u:se'cret@db/x?table=t", "postgresql://u@db/x?table=t&password=secret"} {
		p, err := NewPlan(2, in, nil)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(p.Input, "secret") || strings.Contains(p.Input, "cret") {
			t.Errorf("plan of %q records %q", in, p.Input)
		}
	}
}
