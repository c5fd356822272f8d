// Package shard splits a job over machines by explore batch: shard I of N
// processes the rows whose `batch` key maps to I, with no communication
// between shards, and writes its part of the output (OUT/part-I.parquet)
// and of the metrics (OUT/_metrics/part-I.json). Every group rftpipe
// computes over (tid = batch/task) lives inside one batch, so a job whose
// stages compute nothing across batches gives, over all parts, the rows and
// metrics of one run over the whole store; a stage that needs the rows of
// more than one batch says so (pipeline.Needs.CrossBatch) and the job is
// refused.
//
// The map from batch to shard is FNV-1a (64 bit) of the batch key's string
// rendering (schema.AppendID: integers in decimal, strings as they are, so
// 0 and "0" are one batch), modulo N. It depends on nothing else: any
// process, any day, any number of files, maps a batch to the same shard.
package shard

import (
	"fmt"
	"hash/fnv"

	"strconv"

	"github.com/apache/arrow/go/v17/arrow"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/fspath"
)

// MaxShards is the largest shard count: a Kubernetes Indexed Job runs at
// most this many completions, and merge-metrics lists every missing part.
const MaxShards = 10000

// Shard is shard I of N (0 <= I < N).
type Shard struct {
	N, I int
}

// New returns shard i of n, checked.
func New(n, i int) (Shard, error) {
	switch {
	case n < 1 || n > MaxShards:
		return Shard{}, schema.Usagef("--shards %d is outside its valid range [1,%d]", n, MaxShards)
	case i < 0 || i >= n:
		return Shard{}, schema.Usagef("shard index %d is out of range: %d shards are numbered 0 to %d", i, n, n-1)
	}
	return Shard{N: n, I: i}, nil
}

// Of returns the shard of the batch key rendered as key (schema.AppendID).
func Of(key []byte, n int) int {
	h := fnv.New64a()
	h.Write(key)
	return int(h.Sum64() % uint64(n))
}

// Holds reports whether the batch rendered as key belongs to s.
func (s Shard) Holds(key []byte) bool { return Of(key, s.N) == s.I }

// HoldsInt reports whether the integer batch id v belongs to s.
func (s Shard) HoldsInt(v int64) bool {
	var buf [24]byte
	return s.Holds(strconv.AppendInt(buf[:0], v, 10))
}

// Rows returns the indices of the rows of batch column a that belong to s.
func (s Shard) Rows(a arrow.Array, dst []int64) []int64 {
	var key []byte
	for i := 0; i < a.Len(); i++ {
		key = schema.AppendID(key[:0], a, i)
		if a.IsValid(i) && s.Holds(key) {
			dst = append(dst, int64(i))
		}
	}
	return dst
}

// PartPath is the output store of shard i in directory out.
func PartPath(out string, i int) string {
	return fspath.Join(out, fmt.Sprintf("part-%d.parquet", i))
}

// MetricsDir is the directory of the parts' metrics in out; its name starts
// with "_", so a store read of out leaves it out.
func MetricsDir(out string) string { return fspath.Join(out, "_metrics") }

// MetricsPath is the metrics file of shard i in directory out.
func MetricsPath(out string, i int) string {
	return fspath.Join(MetricsDir(out), fmt.Sprintf("part-%d.json", i))
}
