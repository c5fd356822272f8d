package loss

import (
	"math"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// mix is the planner of mix and mix_chord: PPO on the usual rows
// (expert_mask false) and SFT on the expert rows, each part multiplied by
// n·w (its row count times its share of the mini-batch) and mixed with mu.
type mix struct {
	ppo                  *PPO
	sft                  *SFT
	ppoMode, sftMode     agg.Mode
	mu                   float64 // mix: constant; mix_chord: see schedule
	chord                *chordSchedule
	dynamic              bool
	expPerGPU, gradAccum int64
	tbsUsual, tbsExpert  int64
	unscaledMetrics      bool
	guardEmpty           bool // skip a part without rows (mix; mix_chord opt-in)
}

// chordSchedule is mix_chord's mu: linear warm-up, cosine decay, valley.
type chordSchedule struct {
	warmup, decay int64
	peak, valley  float64
}

// mu returns mix_chord's mu at a training step.
func (c *chordSchedule) mu(step int64) float64 {
	switch {
	case step < c.warmup:
		return float64(step) / float64(c.warmup) * c.peak
	case step-c.warmup >= c.decay: // step >= warmup >= 0 here: no overflow
		return c.valley
	}
	k := float64(step - c.warmup)
	return (c.peak-c.valley)*0.5*(1+math.Cos(math.Pi*k/float64(c.decay))) + c.valley
}

func (x *mix) plan(b *tokens.Batch) (*Plan, error) {
	if err := b.Require(tokens.ExpertMask); err != nil {
		return nil, err
	}
	mu := x.mu
	if x.chord != nil {
		if err := b.Require(tokens.Step); err != nil {
			return nil, err
		}
		steps := b.Step()
		for _, s := range steps {
			if s != steps[0] {
				return nil, bad("step must be the same on every row, got %d and %d", steps[0], s)
			}
		}
		mu = x.chord.mu(steps[0])
	}
	tot := b.Totals()
	B, nu, ne := tot.Rows[tokens.AllRows], tot.Rows[tokens.UsualRows], tot.Rows[tokens.ExpertRows]
	share := func(tbs int64) float64 {
		if x.dynamic {
			return float64(x.expPerGPU) / (float64(B) * float64(tbs))
		}
		return float64(x.gradAccum) / float64(tbs)
	}
	scaleU, scaleE := float64(nu)*share(x.tbsUsual), float64(ne)*share(x.tbsExpert)
	var terms []tokens.Term
	useU, useE := nu > 0 || !x.guardEmpty, ne > 0 || !x.guardEmpty
	if useU {
		terms = append(terms, tokens.Term{Kernel: x.ppo, Rows: tokens.UsualRows, Mode: x.ppoMode, Coef: (1 - mu) * scaleU})
	}
	if useE {
		terms = append(terms, tokens.Term{Kernel: x.sft, Rows: tokens.ExpertRows, Mode: x.sftMode, Coef: mu * scaleE})
	}
	return &Plan{Terms: terms, Finish: func(res []tokens.TermResult) (Outcome, error) {
		m := agg.Metrics{}
		var g, s float64
		part := func(k Kernel, md agg.Mode, r tokens.TermResult, scale float64, prefix string) float64 {
			v, pm := k.Summary(md, r)
			for name, val := range pm {
				if !x.unscaledMetrics {
					val *= scale
				}
				m[prefix+"/"+name] = val
			}
			return v * scale
		}
		if useU {
			g = part(x.ppo, x.ppoMode, res[0], scaleU, "usual")
			res = res[1:]
		}
		if useE {
			s = part(x.sft, x.sftMode, res[0], scaleE, "expert")
		}
		loss := (1-mu)*g + mu*s
		m["loss"] = loss
		if x.chord != nil {
			m["mu"] = mu
		}
		return Outcome{Loss: loss, Metrics: m}, nil
	}}, nil
}

// mixParams are the arguments mix and mix_chord share.
func mixParams() args.Schema {
	i := func(name, doc string) args.Param {
		return args.Param{Name: name, Kind: args.Int, Ctor: int64(1), Doc: doc}
	}
	optMode := func(name, doc string) args.Param {
		p := aggParam("")
		p.Name, p.Nullable, p.Ctor, p.Default, p.InDefaults, p.Doc = name, true, nil, nil, false, doc
		return p
	}
	return append(clipParams(0.2, nil, nil, false),
		args.Param{Name: "use_dynamic_bsz", Kind: args.Bool, Nullable: true,
			Doc: "trainer uses dynamic batch sizes (changes the parts' weights)"},
		i("ppo_mini_batch_size", "trainer mini-batch size (experiences)"),
		i("ppo_micro_batch_size_per_gpu", "trainer micro-batch size per GPU"),
		i("ngpus_trainer", "number of trainer GPUs"),
		i("train_batch_size_usual", "usual experiences per training batch"),
		i("train_batch_size_expert", "expert experiences per training batch"),
		aggParam("token-mean"),
		optMode("sft_loss_agg_mode", "loss_agg_mode of the expert (SFT) part; null: loss_agg_mode"),
		optMode("grpo_loss_agg_mode", "loss_agg_mode of the usual (PPO) part; null: loss_agg_mode"),
		args.Param{Name: "unscaled_metrics", Kind: args.Bool, Ctor: false,
			Doc: "Q-17 fix: report the inner usual/* and expert/* metrics without the n·w part scale"},
	)
}

// floorDiv is Python's a // b (b != 0); MinInt64 // -1 saturates.
func floorDiv(a, b int64) int64 {
	if a == math.MinInt64 && b == -1 {
		return math.MaxInt64
	}
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// newMix builds the common part of mix and mix_chord.
func newMix(v args.Values, sft *SFT) (*mix, error) {
	ppo, err := newPPO(v)
	if err != nil {
		return nil, err
	}
	x := &mix{ppo: ppo, sft: sft, dynamic: v.Bool("use_dynamic_bsz"), unscaledMetrics: v.Bool("unscaled_metrics")}
	// Upstream's integer arithmetic: Python's floor division, which raises
	// ZeroDivisionError on a zero divisor here, or at the first call for a
	// train batch size that floors to 0.
	mini, micro, gpus := v.Int("ppo_mini_batch_size"), v.Int("ppo_micro_batch_size_per_gpu"), v.Int("ngpus_trainer")
	if micro == 0 || gpus == 0 {
		return nil, bad("ppo_micro_batch_size_per_gpu and ngpus_trainer divide ppo_mini_batch_size: they must not be 0, got %d and %d", micro, gpus)
	}
	x.expPerGPU, x.gradAccum = floorDiv(mini, gpus), floorDiv(mini, micro)
	x.tbsUsual, x.tbsExpert = floorDiv(v.Int("train_batch_size_usual"), gpus), floorDiv(v.Int("train_batch_size_expert"), gpus)
	if x.tbsUsual == 0 || x.tbsExpert == 0 {
		return nil, bad("train_batch_size_usual and train_batch_size_expert floor-divided by ngpus_trainer (%d) divide the parts' weights: they must not give 0, got %d and %d",
			gpus, v.Int("train_batch_size_usual"), v.Int("train_batch_size_expert"))
	}
	x.ppoMode, x.sftMode = mode(v, "loss_agg_mode"), mode(v, "loss_agg_mode")
	if v["grpo_loss_agg_mode"] != nil {
		x.ppoMode = mode(v, "grpo_loss_agg_mode")
	}
	if v["sft_loss_agg_mode"] != nil {
		x.sftMode = mode(v, "sft_loss_agg_mode")
	}
	return x, nil
}

func mixDef() *Def {
	return &Def{
		Name: "mix",
		Params: append(args.Schema{{Name: "mu", Kind: args.Float, Ctor: 0.1, Default: 0.1, InDefaults: true,
			Doc: "weight of the expert (SFT) part"}}, mixParams()...),
		Inputs: []string{tokens.OldLogProb, tokens.ActionMask, tokens.Advantages, tokens.ExpertMask},
		build: func(v args.Values) (planner, error) {
			x, err := newMix(v, &SFT{Weight: WeightNone, Metric: "sft_loss"})
			if err != nil {
				return nil, err
			}
			x.mu, x.guardEmpty = v.Float("mu"), true
			return x, nil
		},
	}
}

func mixChordDef() *Def {
	i := func(name, doc string) args.Param {
		return args.Param{Name: name, Kind: args.Int, Ctor: int64(0), Default: int64(0), InDefaults: true, Range: schema.NonNeg, Doc: doc}
	}
	f := func(name, doc string) args.Param {
		return args.Param{Name: name, Kind: args.Float, Ctor: 0.1, Default: 0.1, InDefaults: true, Doc: doc}
	}
	return &Def{
		Name: "mix_chord",
		Params: append(args.Schema{
			i("mu_warmup_steps", "steps of linear warm-up of mu from 0 to mu_peak"),
			i("mu_decay_steps", "steps of cosine decay of mu from mu_peak to mu_valley"),
			f("mu_peak", "mu after warm-up"),
			f("mu_valley", "mu after decay"),
			{Name: "enable_phi_function", Kind: args.Bool, Ctor: true, Default: true, InDefaults: true,
				Doc: "expert part uses sft_phi (else sft)"},
			{Name: "guard_empty_partitions", Kind: args.Bool, Ctor: false,
				Doc: "Q-17 fix: skip a part with no rows like mix does (upstream evaluates it: NaN for seq-mean modes)"},
		}, mixParams()...),
		Inputs: []string{tokens.OldLogProb, tokens.ActionMask, tokens.Advantages, tokens.ExpertMask, tokens.Step},
		build: func(v args.Values) (planner, error) {
			sft := &SFT{Weight: WeightNone, Metric: "sft_loss"}
			if v.Bool("enable_phi_function") {
				sft = &SFT{Weight: WeightPhi, Cutoff: 1, Metric: "sft_phi_loss"}
			}
			x, err := newMix(v, sft)
			if err != nil {
				return nil, err
			}
			x.chord = &chordSchedule{warmup: v.Int("mu_warmup_steps"), decay: v.Int("mu_decay_steps"),
				peak: v.Float("mu_peak"), valley: v.Float("mu_valley")}
			x.guardEmpty = v.Bool("guard_empty_partitions")
			return x, nil
		},
	}
}
