package synth

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"regexp"
	"strconv"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"

	"github.com/rftpipe/rftpipe/schema"
)

// The columns a multi-step agent or a multi-reward task adds:
//
//   - Config.Info adds info (JSON text) with env_state_hash, the anchor
//     state a step starts from (what gigpo groups steps by): the first step
//     of every run of a task starts from the task's initial state, a later
//     step from one of two states of its task and step, so runs meet in the
//     same state; and step_reward, the step's own reward (0, 0.5 or 1);
//   - Config.RewardComponents adds a float64 column reward_<name> per name
//     (what gdpo reads), each 0 or 1, and the reward becomes their sum.
//
// Their draws come from generators of their own, so the other columns keep
// their bytes with or without them.

// componentName is a reward component's name (the column is reward_<name>).
var componentName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// componentColumn returns the column of reward component name.
func componentColumn(name string) string { return "reward_" + name }

// checkAgent validates the Info and RewardComponents options.
func (c Config) checkAgent() error {
	if (c.Info || len(c.RewardComponents) > 0) && (c.Kind == DPO || c.Kind == Pairs) {
		return schema.BadInputf("kind %s has no rewards: info and reward components need kind single or multi", c.Kind)
	}
	seen := map[string]bool{}
	for _, n := range c.RewardComponents {
		if !componentName.MatchString(n) || seen[n] {
			return schema.BadInputf("reward component %q: want distinct names of lower-case letters, digits and _", n)
		}
		seen[n] = true
	}
	return nil
}

// agentFields are the fields the options add, after the other columns.
func (c Config) agentFields() []arrow.Field {
	var fs []arrow.Field
	if c.Info {
		fs = append(fs, schema.Field(schema.Info))
	}
	for _, n := range c.RewardComponents {
		fs = append(fs, arrow.Field{Name: componentColumn(n), Type: arrow.PrimitiveTypes.Float64, Nullable: true})
	}
	return fs
}

// components draws one row's reward components and returns them with
// their sum.
func (c Config) components(rng *rand.Rand, dst []float64) (vals []float64, sum float64) {
	vals = dst[:0]
	for range c.RewardComponents {
		v := 0.0
		if rng.Float64() < 0.5 {
			v = 1
		}
		vals = append(vals, v)
		sum += v
	}
	return vals, sum
}

// infoJSON returns one row's info: its anchor state and step reward.
func (c Config) infoJSON(rng *rand.Rand, batch, task, step int64) string {
	state := int64(0)
	if step > 0 {
		state = 1 + int64(rng.IntN(2))
	}
	h := fnv.New64a()
	var buf [40]byte
	for i, v := range []int64{int64(c.Seed), batch, task, step, state} {
		binary.LittleEndian.PutUint64(buf[8*i:], uint64(v))
	}
	h.Write(buf[:])
	reward := float64(rng.IntN(3)) / 2
	return fmt.Sprintf(`{"env_state_hash":"%016x","step_reward":%s}`, h.Sum64(), strconv.FormatFloat(reward, 'g', -1, 64))
}

// appendAgent appends one row of the agent fields (builders in agentFields
// order).
func (c Config) appendAgent(fs []array.Builder, info string, comps []float64) {
	k := 0
	if c.Info {
		fs[0].(*array.StringBuilder).Append(info)
		k = 1
	}
	for i, v := range comps {
		fs[k+i].(*array.Float64Builder).Append(v)
	}
}
