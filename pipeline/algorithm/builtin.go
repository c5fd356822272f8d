package algorithm

// preset is the default_config() of one type: the keys it lists ("" and 0
// for the ones it does not; those come from the generic defaults).
type preset struct {
	repeatTimes                                                   int
	sample, advantage, klPenalty, policyLoss, klLoss, entropyLoss string
	advantageArgs, policyLossArgs                                 Args
}

func (p preset) config(name string) Config {
	var c Config
	c.AlgorithmType = name
	c.RepeatTimes = p.repeatTimes
	c.Set(SampleStrategy, p.sample, nil)
	c.Set(AdvantageFn, p.advantage, p.advantageArgs)
	c.Set(KLPenaltyFn, p.klPenalty, nil)
	c.Set(PolicyLossFn, p.policyLoss, p.policyLossArgs)
	c.Set(KLLossFn, p.klLoss, nil)
	c.Set(EntropyLossFn, p.entropyLoss, nil)
	return c
}

// Flag shorthands for the table below.
var (
	experience = Flags{UseReference: true, CanBalanceBatch: true, Schema: Experience}
	noRef      = Flags{CanBalanceBatch: true, Schema: Experience}
)

// inTrainer returns f with ComputeAdvantageInTrainer set.
func inTrainer(f Flags) Flags { f.ComputeAdvantageInTrainer = true; return f }

// builtins is the algorithm table of spec algorithms.md, in its order.
func builtins() []*Type {
	std := func(rt int, adv, loss string) preset {
		return preset{repeatTimes: rt, sample: "default", advantage: adv, klPenalty: "none", policyLoss: loss, klLoss: "k2", entropyLoss: "default"}
	}
	noKL := func(rt int, adv, loss string) preset {
		return preset{repeatTimes: rt, sample: "default", advantage: adv, klPenalty: "none", policyLoss: loss, klLoss: "none", entropyLoss: "none"}
	}
	mix := func(loss string) preset {
		return preset{repeatTimes: 8, sample: "mix", advantage: "grpo", policyLoss: loss, entropyLoss: "mix"}
	}
	distill := func(adv string, args Args) preset {
		p := noKL(8, adv, "ppo")
		p.advantageArgs = args
		return p
	}
	rollout := experience
	rollout.UseRollout = true
	gigpo := std(8, "gigpo", "ppo")
	gigpo.advantageArgs = Args{"omega": 1.0, "gamma": 1.0, "fnorm": "none", "epsilon": 1e-6}
	gigpo.policyLossArgs = Args{"clip_range_low": 0.2, "clip_range_high": 0.2, "loss_agg_mode": "token-mean"}
	dapo := std(16, "grpo", "ppo")
	dapo.klLoss = "none"
	return []*Type{
		{name: "sft", class: "SFTAlgorithm", doc: "supervised fine-tuning on prompt + reference answer",
			flags:    Flags{CanBalanceBatch: true, Schema: SFT},
			defaults: preset{sample: "default", policyLoss: "sft", klLoss: "none", entropyLoss: "none"}.config("sft"),
			checkEnv: trainOnly},
		{name: "ppo", class: "PPOAlgorithm", doc: "PPO with a critic and GAE advantages (https://arxiv.org/pdf/1707.06347)",
			flags:    Flags{UseCritic: true, UseReference: true, ComputeAdvantageInTrainer: true, CanBalanceBatch: true, Schema: Experience},
			defaults: std(1, "ppo", "ppo").config("ppo")},
		{name: "grpo", class: "GRPOAlgorithm", doc: "group-relative advantages, PPO loss (https://arxiv.org/pdf/2402.03300)",
			flags: experience, defaults: std(2, "grpo", "ppo").config("grpo")},
		{name: "reinforceplusplus", class: "ReinforcePlusPlusAlgorithm", doc: "REINFORCE++ (https://arxiv.org/pdf/2501.03262)",
			flags: inTrainer(experience), defaults: std(2, "reinforceplusplus", "ppo").config("reinforceplusplus")},
		{name: "rloo", class: "RLOOAlgorithm", doc: "REINFORCE leave-one-out (https://arxiv.org/pdf/2402.14740)",
			flags: inTrainer(experience), defaults: std(2, "rloo", "ppo").config("rloo")},
		{name: "opmd", class: "OPMDAlgorithm", doc: "online policy mirror descent",
			flags: experience, defaults: std(2, "opmd", "opmd").config("opmd")},
		{name: "asymre", class: "AsymREAlgorithm", doc: "asymmetric REINFORCE (https://arxiv.org/pdf/2506.20520)",
			flags: noRef, defaults: noKL(2, "asymre", "opmd").config("asymre")},
		{name: "dpo", class: "DPOAlgorithm", doc: "direct preference optimisation on chosen/rejected pairs (https://arxiv.org/pdf/2305.18290)",
			flags:    Flags{UseReference: true, Schema: DPO},
			defaults: preset{sample: "default", policyLoss: "dpo", klLoss: "k2", entropyLoss: "default"}.config("dpo"),
			checkEnv: trainOnly, mutate: dpoMutate},
		{name: "topr", class: "TOPRAlgorithm", doc: "tapered off-policy REINFORCE (https://arxiv.org/pdf/2503.14286v1)",
			flags: experience, defaults: std(2, "reinforce", "topr").config("topr")},
		{name: "cispo", class: "CISPOAlgorithm", doc: "clipped IS-weight policy optimisation (https://arxiv.org/abs/2506.13585)",
			flags: experience, defaults: std(2, "grpo", "cispo").config("cispo")},
		{name: "gspo", class: "GSPOAlgorithm", doc: "group sequence policy optimisation (https://arxiv.org/pdf/2507.18071)",
			flags: experience, defaults: std(2, "grpo", "gspo").config("gspo")},
		{name: "sapo", class: "SAPOAlgorithm", doc: "soft adaptive policy optimisation (https://arxiv.org/pdf/2511.20347)",
			flags: experience, defaults: std(2, "grpo", "sapo").config("sapo")},
		{name: "mix", class: "MIXAlgorithm", doc: "RL on rollouts mixed with SFT on expert data",
			flags: rollout, defaults: mix("mix").config("mix")},
		{name: "mix_chord", class: "MIXCHORDAlgorithm", doc: "CHORD: RL mixed with SFT, scheduled weights (https://arxiv.org/pdf/2508.11408)",
			flags: rollout, defaults: mix("mix_chord").config("mix_chord")},
		{name: "raft", class: "RAFTAlgorithm", doc: "SFT on rollouts (experience schema)",
			flags:    noRef,
			defaults: preset{sample: "default", policyLoss: "sft", klLoss: "none", entropyLoss: "none"}.config("raft")},
		{name: "sppo", class: "sPPOAlgorithm", doc: "sPPO (https://arxiv.org/pdf/2108.05828)",
			flags: noRef, defaults: noKL(2, "opmd", "sppo").config("sppo")},
		{name: "rec", class: "RECAlgorithm", doc: "REC (https://arxiv.org/pdf/2509.24203)",
			flags: experience, defaults: std(2, "rec", "rec").config("rec")},
		{name: "multi_step_grpo", class: "MultiStepGRPOAlgorithm", doc: "GRPO over multi-step episodes (step-wise advantages)",
			flags: experience, defaults: std(8, "step_wise_grpo", "ppo").config("multi_step_grpo")},
		{name: "on_policy_distill", class: "OnPolicyDistillAlgorithm", doc: "on-policy distillation: advantage = teacher − student log-prob",
			flags: inTrainer(noRef), defaults: distill("on_policy_distill", Args{"kl_coef": 1.0}).config("on_policy_distill")},
		{name: "jsd", class: "JSDAlgorithm", doc: "on-policy distillation with a JSD-style advantage",
			flags: inTrainer(noRef), defaults: distill("jsd", Args{"kl_coef": 1.0, "lambda_coef": 0.5}).config("jsd")},
		// Upstream's default_config names the pipeline-side grpo, which fails
		// on a trainer batch (quirk Q-23); the trainer-side grpo_verl is what
		// the algorithm can run.
		{name: "grpo_verl", class: "GRPOverlAlgorithm", doc: "GRPO computed in the trainer (verl style)",
			flags: inTrainer(experience), defaults: std(2, "grpo_verl", "ppo").config("grpo_verl")},
		// The 0.6 line's types (spec algorithms.md, "Added in the 0.6 line").
		// dapo's operators and overlong reward shaping are configuration
		// (data_processor.experience_pipeline.operators), not defaults.
		{name: "dapo", class: "DAPOAlgorithm", doc: "DAPO: GRPO without a reference model; operators mask_response_truncated, dapo_dynamic_sampling by config (https://arxiv.org/pdf/2503.14476)",
			flags: noRef, defaults: dapo.config("dapo")},
		{name: "gigpo", class: "GiGPOAlgorithm", doc: "group-in-group advantages for multi-step agents (info.env_state_hash) (https://arxiv.org/pdf/2505.10978)",
			flags: experience, defaults: gigpo.config("gigpo")},
		// m2po's class is known from upstream's tests only: use_reference
		// false and default_config() are theirs; use_critic and
		// compute_advantage_in_trainer false follow from grpo (a
		// pipeline-side fn) and a loss without a critic; can_balance_batch
		// and sample_strategy, unknown, take the generic values (true,
		// default).
		{name: "m2po", class: "M2POAlgorithm", doc: "M2PO: masks the tokens of largest squared log-ratio until their second moment is under m2_threshold (https://openreview.net/forum?id=IIgl5MWelz)",
			flags: noRef, defaults: noKL(8, "grpo", "m2po").config("m2po")},
	}
}
