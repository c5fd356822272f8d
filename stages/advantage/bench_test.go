package advantage

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// BenchmarkGRPOStage measures the pure pipeline-side stage on 1,000,000
// experiences (125,000 tasks × 8 runs, data in memory): grouping, group
// statistics, the std_threshold filter and the per-row scores. The
// broadcast over the action mask happens while the pipeline writes and is
// measured by BenchmarkBroadcast.
//
//	go test -run '^$' -bench 'GRPOStage|Broadcast' -benchmem -count 6 ./stages/advantage/ | tee grpo.txt
//	benchstat grpo.txt
func BenchmarkGRPOStage(b *testing.B) {
	const tasks, runs = 125_000, 8
	n := tasks * runs
	rng := rand.New(rand.NewPCG(42, 42))
	reward := make([]float64, n)
	tids := make([]string, n)
	ids := make([]int32, n)
	for t := 0; t < tasks; t++ {
		tid := TID("0", strconv.Itoa(t))
		p := rng.Float64() // per-task pass rate: some groups all 0 or all 1 get filtered
		for r := 0; r < runs; r++ {
			i := t*runs + r
			tids[i], ids[i] = tid, int32(t)
			if rng.Float64() < p {
				reward[i] = 1
			}
		}
	}
	threshold := 0.0
	fn := &GRPO{Epsilon: 1e-6, StdThreshold: &threshold}
	// Correctness check in the setup: both groupings give the same plan.
	byKey, err := fn.Plan(&Input{Reward: reward, Tasks: GroupBy(tids)})
	if err != nil {
		b.Fatal(err)
	}
	tasksByID, err := GroupByIDs(ids, tasks)
	if err != nil {
		b.Fatal(err)
	}
	byID, err := fn.Plan(&Input{Reward: reward, Tasks: tasksByID})
	if err != nil {
		b.Fatal(err)
	}
	if byKey.Filtered != byID.Filtered || byKey.Filtered == 0 || byKey.Filtered == n {
		b.Fatalf("filtered %d / %d rows", byKey.Filtered, byID.Filtered)
	}
	for i := range byKey.Score {
		if byKey.Score[i] != byID.Score[i] || byKey.Keep[i] != byID.Keep[i] {
			b.Fatalf("row %d differs", i)
		}
	}

	cases := []struct {
		name  string
		group func() (Groups, error)
	}{
		// The pipeline hands over dense group ids (DuckDB dense_rank).
		{"group-ids", func() (Groups, error) { return GroupByIDs(ids, tasks) }},
		// Grouping by the rendered tid strings in Go.
		{"tid-strings", func() (Groups, error) { return GroupBy(tids), nil }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				g, err := c.group()
				if err != nil {
					b.Fatal(err)
				}
				if _, err := fn.Plan(&Input{Reward: reward, Tasks: g}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "exp/s")
		})
	}
}

// BenchmarkBroadcast measures writing one row's advantages (score × mask)
// for 256-token responses.
func BenchmarkBroadcast(b *testing.B) {
	const tokens = 256
	mask := make([]bool, tokens)
	for i := range mask {
		mask[i] = i%7 != 0
	}
	dst := make([]float32, tokens)
	b.ReportAllocs()
	for b.Loop() {
		Broadcast(dst, -0.5, mask)
	}
	b.ReportMetric(float64(tokens)*float64(b.N)/b.Elapsed().Seconds(), "tok/s")
}
