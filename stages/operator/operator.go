// Package operator holds the experience operators of Trinity-RFT's 0.6 line
// (../shared/spec/operators.md) as pure functions over one explore batch of
// rows: dapo_dynamic_sampling, mask_response_truncated, reward_std_filter
// (0.6 metric names), cod_overwrite_reward_with_returns, and DAPO's overlong
// reward shaping math_dapo_reward. Staleness, the read predicate of the
// staleness_control sample strategy, runs as the chain's first operator
// without being one upstream (not registered).
//
// An operator reads the per-row scalars it declares (Needs) from an Input
// and returns a Result: the kept rows in upstream's output order, a drop
// reason for every row it removes (what a rejected-rows store records), the
// rows whose action mask it zeroes, the new rewards it sets, and its metrics
// under upstream's names. Operators never touch token columns: the caller
// carries the result out while it streams the rows.
package operator

import (
	"sync"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/advantage"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/registry"
)

// Drop reasons, as a rejected-rows store writes them (column drop_reason);
// the group filters' are the advantage plans' (advantage.DropReasons).
const (
	ReasonAllCorrect = "dapo_all_correct"
	ReasonAllWrong   = "dapo_all_wrong"
	ReasonSingleton  = advantage.DropSingleton
	ReasonStdBelow   = advantage.DropStdBelow
)

// Input is one explore batch as an operator reads it: slices indexed by
// input row; only Tasks and Reward are always set, the others when the
// operator's Needs ask for them.
type Input struct {
	// Tasks groups the rows by tid ("batch/task"), first-appearance order.
	Tasks advantage.Groups
	// Reward is the reward of every row, NaN for null.
	Reward []float64
	// NullReward, when set, says which rows have a null reward (a NaN one
	// is not null); nil: none.
	NullReward []bool
	// Metric is metrics[Needs.Metric] of every row where HasMetric.
	Metric    []float64
	HasMetric []bool
	// Truncated says the row's truncate_status is "response_truncated".
	Truncated []bool
	// ResponseLength is the number of response tokens of every row.
	ResponseLength []int64
	// ReturnsNorm is info.returns_norm of every row where HasReturnsNorm.
	ReturnsNorm    []float64
	HasReturnsNorm []bool
	// ModelVersion is the model_version of every row, -1 for null.
	ModelVersion []int64
}

// N returns the number of rows.
func (in *Input) N() int { return len(in.Reward) }

// rewardNull reports whether row r's reward is null.
func (in *Input) rewardNull(r int32) bool { return in.NullReward != nil && in.NullReward[r] }

// Needs says what an operator reads besides the tasks and rewards.
type Needs struct {
	// Metric names the key of the metrics map read into Input.Metric.
	Metric         string
	Truncated      bool
	ResponseLength bool
	ReturnsNorm    bool
	ModelVersion   bool
}

// Result is what an operator returns for one Input.
type Result struct {
	// Order lists the kept input rows in upstream's output order.
	Order []int32
	// Reason is, per input row, "" for a kept row, else why it was dropped.
	Reason []string
	// MaskZero, when set, says per input row that its action mask is set to
	// all zero.
	MaskZero []bool
	// Reward, when set, is the new reward of every input row.
	Reward []float64
	// RowMetrics, when set, are per-row values written into each row's
	// metrics map (math_dapo_reward: accuracy, format_score).
	RowMetrics map[string][]float64
	// Metrics are the operator's metrics under upstream's names.
	Metrics agg.Metrics
}

// Dropped returns the number of dropped rows.
func (r *Result) Dropped() int { return len(r.Reason) - len(r.Order) }

// Operator is a configured experience operator.
type Operator interface {
	Needs() Needs
	Apply(in *Input) (*Result, error)
}

// Constructor builds a configured operator from its resolved args.
type Constructor func(a args.Values) (Operator, error)

// Spec describes one registered operator: its upstream name, args and
// constructor.
type Spec = registry.Spec[Constructor]

// Registry maps operator names to Specs.
type Registry = registry.Registry[Constructor]

// Default returns the registry of every built-in operator, built once.
var Default = sync.OnceValue(func() *Registry {
	return registry.Must("experience operator", dapoDynamicSamplingSpec(), maskResponseTruncatedSpec(),
		rewardStdFilterSpec(), codOverwriteSpec(), mathDAPORewardSpec())
})

// New builds operator name of reg with user args (nil: the signature
// defaults; the operators have no default_args()).
func New(reg *Registry, name string, user map[string]any) (Operator, error) {
	s, err := reg.Get(name)
	if err != nil {
		return nil, err
	}
	v, err := s.Params.Resolve(user)
	if err != nil {
		return nil, schema.BadInputf("operator %s: %v", name, err)
	}
	return s.New(v)
}

// keepAll returns a result that keeps every one of n rows in input order.
func keepAll(n int) *Result {
	r := &Result{Order: make([]int32, n), Reason: make([]string, n), Metrics: agg.Metrics{}}
	for i := range r.Order {
		r.Order[i] = int32(i)
	}
	return r
}

// errorf returns a bad-input error prefixed with the operator name.
func errorf(op, format string, a ...any) error {
	return schema.BadInputf("operator %s: "+format, append([]any{op}, a...)...)
}

func param(name string, kind args.Kind, def any, doc string) args.Param {
	return args.Param{Name: name, Kind: kind, Nullable: def == nil, Ctor: def, Doc: doc}
}
