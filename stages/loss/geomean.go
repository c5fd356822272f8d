package loss

import (
	"math"

	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/internal/torch"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// GeoMean is the kernel of verl's geo_mean (GMPO): a geometric mean of the
// token ratios per row, clipped in log space in the advantage's direction:
//
//	λ = lp - old, σ = sign(A), λc = clamp(λ, -Low, High), λ* = σ·min(σλ, σλc)
//	ρ_b = exp(Σλ*·m / (n_b+1e-8)), Ā_b = ΣA·m / (n_b+1e-8)
//	L_b = -Ā_b·ρ_b · exp(Σ ln(w+1e-10)·m / (n_b+1e-8))   (w: rollout_is_weights)
//	loss = mean over all B rows (loss_agg_mode and global denominators ignored)
//
// Sums: loss, Σ[λ≠λc][A>0]·m, Σ[λ≠λc][A<0]·m, Σ(-λ)·m.
type GeoMean struct {
	Low, High float64
}

// Sums implements tokens.Kernel.
func (k *GeoMean) Sums() int { return 4 }

// Row implements tokens.Kernel.
func (k *GeoMean) Row(r *tokens.Row, s []float64) {
	lp := r.LP
	n := len(lp)
	old, adv, m, grad := r.Old[:n], r.Adv[:n], r.Mask[:n], r.Grad[:n]
	var sLam, sAdv, sLogW, sHigh, sLow, sKL float64
	for t, x := range lp {
		mt := m[t]
		lam := x - old[t]
		a := adv[t]
		sg := sign(a)
		lc, _ := torch.Clamp(lam, -k.Low, k.High)
		sLam += sg * math.Min(sg*lam, sg*lc) * mt // plain products, as upstream
		sAdv += a * mt
		if r.Weights != nil {
			sLogW += math.Log(r.Weights[t]+1e-10) * mt
		}
		if mt != 0 {
			if lam != lc {
				sHigh += b2f(a > 0) * mt
				sLow += b2f(a < 0) * mt
			}
			sKL -= lam * mt
		}
	}
	den := r.Count + agg.Eps
	rho := math.Exp(sLam / den)
	coef := -(sAdv / den) * rho * math.Exp(sLogW/den)
	s[0] += r.Scale * coef
	s[1] += sHigh
	s[2] += sLow
	s[3] += sKL
	gs := r.GradScale * coef / den
	for t, x := range lp {
		mt := m[t]
		if mt == 0 {
			grad[t] = 0
			continue
		}
		lam := x - old[t]
		sg := sign(adv[t])
		lc, dc := torch.Clamp(lam, -k.Low, k.High)
		// ∂λ*/∂λ: σ² times the derivative of the selected operand of min;
		// torch.min splits a tie evenly.
		var d float64
		switch a, b := sg*lam, sg*lc; {
		case a < b:
			d = 1
		case a > b:
			d = dc
		default:
			d = 0.5 * (1 + dc)
		}
		grad[t] = gs * sg * sg * d * mt
	}
}

// Summary implements Kernel: pg_clipfrac, pg_clipfrac_lower, ppo_kl, pg_loss.
func (k *GeoMean) Summary(mode agg.Mode, r tokens.TermResult) (float64, agg.Metrics) {
	s, st := r.Sums, r.Stats
	loss := agg.Total(mode, st.Rows, s[0])
	return loss, agg.Metrics{
		"pg_clipfrac":       st.MaskedMean(s[1]),
		"pg_clipfrac_lower": st.MaskedMean(s[2]),
		"ppo_kl":            st.MaskedMean(s[3]),
		"pg_loss":           loss,
	}
}

// sign is torch.sign: -1, 0 or 1 (NaN stays NaN).
func sign(x float64) float64 {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return x * 0
}

// geoMeanDef is verl's geo_mean (compute_policy_loss_geo_mean).
func geoMeanDef() *Def {
	return &Def{
		Name:     "geo_mean",
		CPUOnly:  true,
		Params:   clipParams(0.2, nil, nil, false),
		Inputs:   []string{tokens.OldLogProb, tokens.ActionMask, tokens.Advantages},
		Weighted: true,
		build: func(v args.Values) (planner, error) {
			low, high, err := clipRange(v)
			if err != nil {
				return nil, err
			}
			// The mean over all B rows is seq-mean-token-sum's row weight 1/B.
			return single{k: &GeoMean{Low: low, High: high}, mode: agg.SeqMeanTokenSum}, nil
		},
	}
}
