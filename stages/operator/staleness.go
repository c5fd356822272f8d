package operator

import "github.com/rftpipe/rftpipe/stages/agg"

// ReasonStale is the drop reason of a row the staleness_control sample
// strategy does not read.
const ReasonStale = "stale_model_version"

// Staleness is the read predicate of the staleness_control sample strategy
// (spec algorithms.md §staleness_control): the trainer's reader returns only
// rows with model_version ≥ MinVersion, MinVersion = max(step −
// max_staleness, 0); the others are discarded (upstream's queue) or left
// unread (its SQL reader). A null model_version never satisfies it, as SQL's
// comparison. Rows keep store order: the predicate, not upstream's reader
// order (FIFO or newest first), is what a batch job can reproduce. It is not
// an experience operator upstream and is not registered: package builder puts
// it first in the operator chain of a job whose sample strategy is
// staleness_control.
type Staleness struct {
	MinVersion int64
	// Beyond: the minimum exceeds every int64 version, so no row is read.
	Beyond bool
}

// Needs implements Operator.
func (s Staleness) Needs() Needs { return Needs{ModelVersion: true} }

// Apply implements Operator. Metrics: filtered_count (rows dropped) and
// min_model_version.
func (s Staleness) Apply(in *Input) (*Result, error) {
	n := in.N()
	res := &Result{Reason: make([]string, n)}
	for r := 0; r < n; r++ {
		if v := in.ModelVersion[r]; v < 0 || v < s.MinVersion || s.Beyond {
			res.Reason[r] = ReasonStale
			continue
		}
		res.Order = append(res.Order, int32(r))
	}
	res.Metrics = agg.Metrics{"filtered_count": float64(res.Dropped()), "min_model_version": float64(s.MinVersion)}
	return res, nil
}
