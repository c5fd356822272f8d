/*
 * rft_loss.h — per-token math of rftpipe's loss kernels, written once and
 * compiled twice: by NVRTC into the CUDA kernels of rft_loss.cu, and by a C
 * compiler (package gpu/kernels, cgo) that checks it on the CPU against
 * the Go kernels of stages/loss and the golden vectors. Keep it C99 and
 * include-free under CUDA (NVRTC has no standard headers).
 *
 * Every kernel mirrors one Go kernel type of stages/loss (same parameters,
 * same sums in the same order) and is evaluated per row in three steps:
 *
 *   1. row statistic (kernels with rft_has_stat): stat_tok accumulates over
 *      the row's tokens, stat_fin turns the total into the statistic;
 *   2. rft_token per token: adds the token's contributions to red[] and
 *      returns the value v with grad = GradScale_row · v;
 *   3. rft_row_fin: turns the row's red[] (and statistic) into its
 *      contributions to the term's sums — exactly the Go kernel's s[] — or,
 *      for per-row outputs (DPO), into rowout[0..1].
 *
 * All arithmetic is in double whatever the storage type of the inputs.
 */
#ifndef RFT_LOSS_H
#define RFT_LOSS_H

#if defined(__CUDACC__)
#define RFT_FN __device__ __forceinline__
#else
#include <math.h>
#define RFT_FN static inline
#endif

/* Kernel kinds (values are part of the Go side's contract: gpu/kernels.go). */
enum {
	RFT_PPO = 0,
	RFT_GSPO = 1,
	RFT_CISPO = 2,
	RFT_SAPO = 3,
	RFT_TOPR = 4,
	RFT_SPPO = 5,
	RFT_OPMD = 6,
	RFT_SFT = 7,
	RFT_REC = 8,
	RFT_IS = 9,
	RFT_DPO_SUMS = 10,
	RFT_ROW_FACTOR = 11,
	RFT_KL = 12,
	RFT_ENTROPY = 13,
	RFT_PG = 14,
	RFT_NKINDS = 15
};

/* KL estimators (stages/kl.Kind values, flag[0] of RFT_KL). */
enum { RFT_KL_NONE = 0, RFT_KL_K1 = 1, RFT_KL_K2 = 2, RFT_KL_K3 = 3, RFT_KL_LOW_VAR = 4, RFT_KL_ABS = 5, RFT_KL_CORRECTED_K3 = 6 };

/* SFT weightings (loss.WeightNone, WeightProb, WeightPhi). */
enum { RFT_SFT_NONE = 0, RFT_SFT_PROB = 1, RFT_SFT_PHI = 2 };

/* REC clip modes, weights and regularizers (flag[0], flag[1], flag[2]). */
enum { RFT_REC_CLIP_NONE = 0, RFT_REC_ONE_SIDE = 1, RFT_REC_GSPO_ONE_SIDE = 2, RFT_REC_TWO_SIDE = 3, RFT_REC_RING = 4 };
enum { RFT_REC_W_NONE = 0, RFT_REC_W_IS = 1, RFT_REC_W_GSPO_IS = 2, RFT_REC_W_ADVANTAGE = 3, RFT_REC_W_TRUNCATED_IS = 4 };
enum { RFT_REC_REG_NONE = 0, RFT_REC_REG_K2 = 1, RFT_REC_REG_FORWARD_KL = 2 };

/* Most per-token reductions and sums of any kernel. */
#define RFT_MAXRED 6

/* Upstream's mask-count epsilon (agg.Eps). */
#define RFT_EPS 1e-8

/*
 * rft_kernel is one kernel's configuration. Layout (80 bytes, no padding) is
 * mirrored by lower.Kernel (gpu/internal/lower); gpu/kernels checks sizes and offsets.
 *
 *   PPO:    p = {1-Low, 1+High, ClipC, Delta}, flag = {SeqMask, Fallback}
 *   GSPO:   p = {1-Low, 1+High}
 *   CISPO:  p = {1-Low, 1+High, 1-MaskLow, 1+MaskHigh}, flag = {MaskClip}
 *   SAPO:   p = {TauPos, TauNeg}, flag = {PaperGradient}
 *   TOPR:   p = {Threshold}, flag = {SequenceRatio}
 *   SPPO:   p = {1/(1+Eps), 1+Eps}
 *   OPMD:   p = {1/(1+Tau)}
 *   SFT:    p = {ln Cutoff}, flag = {Weight, Cutoff < 1}
 *   REC:    p = {1-Low, 1+High, 1-LowPrime, 1+HighPrime, Coef, Temp, FixOPD},
 *           flag = {clip mode, weight, regularizer}
 *   KL:     flag = {estimator, DetachRatio, old_logprob present}
 *   PG:     flag = {KL}
 *   IS, DPO_SUMS, ROW_FACTOR, ENTROPY: none
 */
typedef struct {
	int kind;
	int flag[3];
	double p[8];
} rft_kernel;

/* One token's inputs (absent inputs read as 0). */
typedef struct {
	double lp, old, ref, adv, m, ent;
} rft_tok;

/* rft_clamp is torch.Clamp (stages/internal/torch): x clamped to [lo, hi]; *in = 1 inside
   (bounds included), 0 where clamped. NaN passes through with *in = 1. */
RFT_FN double rft_clamp(double x, double lo, double hi, double *in) {
	if (x < lo) {
		*in = 0;
		return lo;
	}
	if (x > hi) {
		*in = 0;
		return hi;
	}
	*in = 1;
	return x;
}

RFT_FN double rft_sigmoid(double x) { return 1 / (1 + exp(-x)); }

/* Number of token reductions red[] a kernel uses. */
RFT_FN int rft_nred(int kind) {
	switch (kind) {
	case RFT_PPO: return 5;
	case RFT_GSPO: return 3;
	case RFT_CISPO: return 3;
	case RFT_SAPO: return 5;
	case RFT_TOPR: return 3;
	case RFT_SPPO: return 2;
	case RFT_OPMD: return 1;
	case RFT_SFT: return 1;
	case RFT_REC: return 2;
	case RFT_IS: return 3;
	case RFT_DPO_SUMS: return 2;
	case RFT_KL: return 1;
	case RFT_ENTROPY: return 1;
	case RFT_PG: return 2;
	default: return 0;
	}
}

/* Number of sums a kernel contributes to (the Go kernel's Sums()). */
RFT_FN int rft_nsums(int kind) {
	switch (kind) {
	case RFT_PPO: return 6;
	case RFT_GSPO: return 4;
	case RFT_DPO_SUMS: return 0;
	case RFT_ROW_FACTOR: return 0;
	default: return rft_nred(kind);
	}
}

/* Whether the kernel needs a row statistic before its token pass. */
RFT_FN int rft_has_stat(const rft_kernel *k) {
	switch (k->kind) {
	case RFT_PPO: return k->flag[0];
	case RFT_GSPO: return 1;
	case RFT_TOPR: return k->flag[0];
	case RFT_REC: return k->flag[0] == RFT_REC_GSPO_ONE_SIDE;
	default: return 0;
	}
}

/* Whether the kernel writes a gradient (DPO's sums pass does not). */
RFT_FN int rft_writes_grad(int kind) { return kind != RFT_DPO_SUMS; }

/* PPO's log-ratio: 0 with fallback_to_policy_gradient. */
RFT_FN double rft_ppo_d(const rft_kernel *k, const rft_tok *t) { return k->flag[1] ? 0.0 : t->lp - t->old; }

/* Step 1: accumulate the row statistic's numerator. */
RFT_FN void rft_stat_tok(const rft_kernel *k, const rft_tok *t, double *acc) {
	if (k->kind == RFT_PPO) {
		/* Plain product (NaN under a 0 mask propagates), quirk Q-19. */
		double in;
		double d = rft_clamp(rft_ppo_d(k, t), -20, 20, &in);
		*acc += -d * t->m;
		return;
	}
	/* GSPO, REC gspo-one-side: masked_mean(lp - old); TOPR: Σ (lp-old)·m. */
	if (t->m != 0)
		*acc += (t->lp - t->old) * t->m;
}

/* Step 1': the statistic from the row's numerator and mask count. */
RFT_FN double rft_stat_fin(const rft_kernel *k, double acc, double count) {
	double in;
	switch (k->kind) {
	case RFT_PPO: return acc / (count + 1e-10); /* k_b, epsilon 1e-10 */
	case RFT_GSPO: return acc / (count + RFT_EPS); /* s_b */
	case RFT_TOPR: return exp(rft_clamp(acc, -20, 20, &in)); /* sequence ratio */
	case RFT_REC: return exp(acc / (count + RFT_EPS)); /* rho */
	default: return 0;
	}
}

RFT_FN int rft_rec_keep(const rft_kernel *k, double a, double ratio, double rho) {
	double lo = k->p[0], hi = k->p[1];
	switch (k->flag[0]) {
	case RFT_REC_TWO_SIDE: return ratio >= lo && ratio <= hi;
	case RFT_REC_ONE_SIDE: return (ratio <= hi && a >= 0) || (a <= 0 && ratio >= lo);
	case RFT_REC_GSPO_ONE_SIDE: return (rho <= hi && a >= 0) || (rho >= lo && a <= 0);
	case RFT_REC_RING:
		return (lo <= ratio && ratio <= hi) || (a >= 0 && ratio <= k->p[2]) || (a <= 0 && ratio >= k->p[3]);
	default: return 1;
	}
}

/* k3 = exp(x) - 1 - x with x = ref - lp, and its derivative 1 - exp(x). */
RFT_FN double rft_k3(double lp, double ref, double *d) {
	double x = ref - lp, e = exp(x);
	*d = 1 - e;
	return e - 1 - x;
}

/* stages/kl.Fn.Token: the KL estimate at one token and d/dlp. */
RFT_FN double rft_kl(const rft_kernel *k, double lp, double ref, double old, double *d) {
	double x, px, pk, e, v;
	switch (k->flag[0]) {
	case RFT_KL_K1: *d = 1; return lp - ref;
	case RFT_KL_K2: x = lp - ref; *d = x; return 0.5 * x * x;
	case RFT_KL_K3: return rft_k3(lp, ref, d);
	case RFT_KL_LOW_VAR:
		x = rft_clamp(ref - lp, -20, 20, &px);
		e = exp(x);
		v = rft_clamp(e - x - 1, -10, 10, &pk);
		*d = -pk * px * (e - 1);
		return v;
	case RFT_KL_ABS:
		x = lp - ref;
		if (x > 0) { *d = 1; return x; }
		if (x < 0) { *d = -1; return -x; }
		*d = 0;
		return 0;
	case RFT_KL_CORRECTED_K3: {
		double dk, r, w, pw, g;
		v = rft_k3(lp, ref, &dk);
		if (!k->flag[2]) { *d = dk; return v; }
		r = exp(lp - old); /* the ratio carries gradient unless DetachRatio */
		w = rft_clamp(r, 0, 2, &pw);
		g = dk * w;
		if (!k->flag[1])
			g += v * pw * r;
		*d = g;
		return v * w;
	}
	}
	*d = 0;
	return 0;
}

/*
 * Step 2: one token. Adds to red[] and returns v (grad = GradScale · v);
 * masked tokens (m == 0) return 0 and add nothing, except PPO's count of
 * dropped positions, which counts every position.
 */
RFT_FN double rft_token(const rft_kernel *k, const rft_tok *t, double stat, double *red) {
	double m = t->m, x = t->lp, a = t->adv, in, dd;
	switch (k->kind) {
	case RFT_PPO: {
		int drop = k->flag[0] && stat > k->p[3];
		if (drop && a < 0)
			red[4] += 1;
		if (m == 0)
			return 0;
		double d = rft_clamp(rft_ppo_d(k, t), -20, 20, &dd);
		double ratio = exp(d);
		double cr = rft_clamp(ratio, k->p[0], k->p[1], &in);
		double l1 = -a * ratio, l2 = -a * cr;
		double l = l1, g = -a * ratio * dd;
		if (l2 > l1) {
			l = l2;
			g = g * in;
			red[1] += m;
		}
		if (a < 0) {
			double l3 = -a * k->p[2];
			if (l > l3) {
				l = l3;
				g = 0;
				red[2] += m;
			} else if (l == l3) {
				g *= 0.5; /* torch.min splits a tie's gradient evenly */
			}
			if (drop) {
				l = l * 0;
				g = 0;
			}
		}
		red[0] += l * m;
		red[3] -= d * m;
		return m * g;
	}
	case RFT_GSPO: {
		if (m == 0)
			return 0;
		double ratio = exp(stat);
		double cr = rft_clamp(ratio, k->p[0], k->p[1], &in);
		double l1 = -a * ratio, l2 = -a * cr;
		double l = l1, g = -a * ratio;
		if (l2 > l1) {
			l = l2;
			g = g * in;
			red[1] += m;
		}
		red[0] += l * m;
		red[2] -= (x - t->old) * m;
		return m * g;
	}
	case RFT_CISPO: {
		if (m == 0)
			return 0;
		double d = x - t->old; /* no clamp */
		double ratio = exp(d);
		double w = rft_clamp(ratio, k->p[0], k->p[1], &in);
		double keep = 1;
		if (k->flag[0] && ((ratio > k->p[3] && a > 0) || (ratio < k->p[2] && a < 0)))
			keep = 0;
		double g = -a * w * keep;
		red[0] += g * x * m;
		red[1] -= d * m;
		red[2] += keep * m;
		return m * g;
	}
	case RFT_SAPO: {
		if (m == 0)
			return 0;
		double d = x - t->old; /* no clamp */
		double ratio = exp(d);
		double tau = k->p[1];
		if (a > 0) {
			tau = k->p[0];
			red[4] += m;
		}
		double sig = rft_sigmoid(tau * (ratio - 1));
		double gate = sig * 4 / tau;
		double l, g;
		if (k->flag[0]) {
			l = -a * gate;
			g = -a * 4 * sig * (1 - sig) * ratio;
		} else {
			l = -a * gate * x;
			g = -a * gate;
		}
		red[0] += l * m;
		red[1] -= d * m;
		red[2] += gate * m;
		red[3] += ratio * m;
		return m * g;
	}
	case RFT_TOPR: {
		if (m == 0)
			return 0;
		double ratio = k->flag[0] ? stat : exp(x - t->old);
		double alpha = 1;
		if (a <= k->p[0])
			alpha = rft_clamp(ratio, 0, 1, &in);
		double g = -alpha * a;
		red[0] += g * x * m;
		red[1] += alpha * m;
		red[2] += ratio * m;
		return m * g;
	}
	case RFT_SPPO: {
		if (m == 0)
			return 0;
		double d = x - t->old;
		double ratio = exp(d);
		double inr = (k->p[0] <= ratio && ratio <= k->p[1]) ? 1.0 : 0.0;
		double g = -a * inr;
		red[0] += g * d * m;
		red[1] += (1 - inr) * m;
		return m * g;
	}
	case RFT_OPMD: {
		if (m == 0)
			return 0;
		double g = -a * k->p[0];
		red[0] += g * x * m;
		return m * g;
	}
	case RFT_SFT: {
		if (m == 0)
			return 0;
		double l, g;
		if (k->flag[0] == RFT_SFT_NONE) {
			l = -x;
			g = -1;
		} else if (k->flag[0] == RFT_SFT_PROB) {
			double p = exp(x);
			l = -x * p;
			g = -p;
		} else {
			double p = exp(x); /* before the cutoff clamp */
			double phi = p * (1 - p);
			double xc = x, pass = 1;
			if (k->flag[1] && x > k->p[0]) {
				xc = k->p[0];
				pass = 0;
			}
			l = -xc * phi;
			g = -phi * pass;
		}
		red[0] += l * m;
		return m * g;
	}
	case RFT_REC: {
		if (m == 0)
			return 0;
		double d = x - t->old;
		double ratio = exp(d);
		double kf = rft_rec_keep(k, a, ratio, stat) ? 1.0 : 0.0;
		double w = a;
		switch (k->flag[1]) {
		case RFT_REC_W_IS: w = a * ratio; break;
		case RFT_REC_W_GSPO_IS: w = a * stat; break;
		case RFT_REC_W_ADVANTAGE: w = a * exp(a / k->p[5]); break;
		case RFT_REC_W_TRUNCATED_IS: /* clamp(ratio, 1-LowPrime, 1+HighPrime), NaN kept */
			w = a * (ratio < k->p[2] ? k->p[2] : ratio > k->p[3] ? k->p[3] : ratio);
			break;
		}
		if (k->p[6] != 0)
			w -= d; /* fix_opd_advantage: + old - sg(lp) */
		double l = -w * x * kf, g = -w * kf;
		if (k->flag[2] == RFT_REC_REG_FORWARD_KL) {
			l = l - k->p[4] * x;
			g = g - k->p[4];
		} else if (k->flag[2] == RFT_REC_REG_K2) {
			l = l + k->p[4] * d * d;
			g = g + 2 * k->p[4] * d;
		}
		red[0] += l * m;
		red[1] += (1 - kf) * m;
		return m * g;
	}
	case RFT_IS: {
		if (m == 0)
			return 0;
		double d = rft_clamp(x - t->old, -20, 20, &dd);
		double ratio = exp(d);
		double l = -a * ratio;
		red[0] += l * m;
		red[1] += ratio * m;
		red[2] -= d * m;
		return m * l * dd;
	}
	case RFT_DPO_SUMS:
		if (m != 0) {
			red[0] += x * m;
			red[1] += t->ref * m;
		}
		return 0;
	case RFT_ROW_FACTOR:
		return m; /* grad = F_row · m at every position */
	case RFT_KL: {
		if (m == 0)
			return 0;
		double d, v = rft_kl(k, x, t->ref, t->old, &d);
		red[0] += v * m;
		return m * d;
	}
	case RFT_ENTROPY:
		if (m == 0)
			return 0;
		red[0] += t->ent * m; /* gradient w.r.t. the entropy input */
		return m;
	case RFT_PG:
		if (m == 0)
			return 0;
		red[0] += -a * x * m;
		if (k->flag[0])
			red[1] -= (x - t->old) * m;
		return m * -a;
	}
	return 0;
}

/*
 * Step 3: the row's contributions to the term's sums (s) — Scale multiplies
 * the loss sum only, as in the Go kernels — or its per-row outputs.
 */
RFT_FN void rft_row_fin(const rft_kernel *k, const double *red, double stat, double scale, double *s, double *rowout) {
	int i, n = rft_nred(k->kind);
	switch (k->kind) {
	case RFT_DPO_SUMS:
		rowout[0] = red[0];
		rowout[1] = red[1];
		return;
	case RFT_ROW_FACTOR:
		return;
	}
	s[0] += scale * red[0];
	for (i = 1; i < n; i++)
		s[i] += red[i];
	if (k->kind == RFT_PPO && k->flag[0])
		s[5] += stat; /* Σ_rows k_b */
	if (k->kind == RFT_GSPO)
		s[3] -= stat; /* Σ_rows -s_b */
}

#endif /* RFT_LOSS_H */
