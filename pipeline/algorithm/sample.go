package algorithm

import (
	"math"
	"math/big"
	"sync"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/registry"
)

// SampleStrategies returns the registry of the four upstream sample
// strategies, built once: how the trainer assembles a batch from the
// experience buffer (spec algorithms.md §Sample strategies). rftpipe writes
// stores rather than trainer batches, so only the name, the arguments and
// their validation matter here: the specs construct nothing (struct{}).
var SampleStrategies = sync.OnceValue(func() *registry.Registry[struct{}] {
	return registry.Must("sample strategy", []registry.Spec[struct{}]{
		{Name: "default", Doc: "read train_batch_size rows from the experience buffer"},
		{Name: "warmup", Doc: "deprecated alias of default"},
		{Name: "staleness_control", Doc: "read only rows with info.model_version >= step - max_staleness",
			Params: args.Schema{{Name: "max_staleness", Kind: args.Float, Range: "[-inf,inf]", Ctor: math.Inf(1),
				Doc: "oldest model version accepted, relative to the trainer step (default: no limit)"}}},
		{Name: "mix", Doc: "usual rows plus ceil(expert_data_ratio·N) expert (SFT) rows; adds expert_mask and step",
			Params: args.Schema{
				{Name: "expert_data_ratio", Kind: args.Float, Range: schema.Unit, Ctor: 0.5, Default: 0.5, InDefaults: true,
					Doc: "fraction of the batch read from the expert buffer"},
				{Name: "sft_dataset_name", Kind: args.String, Ctor: "sft_dataset", Default: "sft_dataset", InDefaults: true,
					Doc: "auxiliary buffer holding the expert data"},
			}},
	}...)
})

// MinModelVersion returns the oldest model_version the staleness_control
// sample strategy reads at trainer step step: max(step − max_staleness, 0)
// (spec algorithms.md §staleness_control), rounded up as an integer
// version compares with it; 0 means no filter, as upstream's reader takes
// it. It is computed exactly, so no step overflows or loses digits; beyond
// is true when it exceeds every int64 (no row is read; min is then
// MaxInt64). Other strategies read every version (0).
func (r *Resolved) MinModelVersion(step int64) (min int64, beyond bool, err error) {
	c := &r.Config
	if c.Fn(SampleStrategy) != "staleness_control" {
		return 0, false, nil
	}
	d, err := SampleStrategies().Get("staleness_control")
	if err != nil {
		return 0, false, err
	}
	v, err := d.Params.Resolve(c.Args(SampleStrategy))
	if err != nil {
		return 0, false, keyErr(SampleStrategy.ArgsKey(), err)
	}
	switch ms := v.Float("max_staleness"); {
	case math.IsInf(ms, 1):
		return 0, false, nil
	case math.IsInf(ms, -1):
		return math.MaxInt64, true, nil
	default:
		// step − ms exactly: a float64 needs at most 1024+53 bits beside
		// the 63 of step.
		x := new(big.Float).SetPrec(1200).SetInt64(step)
		x.Sub(x, big.NewFloat(ms))
		ceil, acc := x.Int(nil) // truncated towards 0
		if acc == big.Below {
			ceil.Add(ceil, big.NewInt(1))
		}
		switch {
		case ceil.Sign() <= 0:
			return 0, false, nil
		case !ceil.IsInt64():
			return math.MaxInt64, true, nil
		}
		return ceil.Int64(), false, nil
	}
}
