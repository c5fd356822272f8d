package rollout

import (
	"math"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/internal/fastexp"
	"github.com/rftpipe/rftpipe/stages/parallel"
)

const (
	eps    = agg.Eps
	safety = 20.0 // verl's SAFETY_BOUND on log ratios before exp
	// Prefix is the prefix of every metric of the assembled call.
	Prefix = "rollout_corr/"
)

// errNoValid is verl's error for a batch without a valid token.
var errNoValid = schema.BadInputf("response_mask must contain at least one valid token (1).")

// Input is one record batch: per-token values laid out by Rows (ragged
// rows; positions past a row's length do not exist and need no padding).
type Input struct {
	Rows agg.Rows
	// Old are the log-probs of the training policy π_old (decoupled mode:
	// the trainer's old_logprob; inside the bypass_mode loss: the current
	// log-prob).
	Old []float64
	// Rollout are the rollout engine's log-probs.
	Rollout []float64
	// Mask is the response mask, 0/1.
	Mask []float64
}

func (in Input) check() error {
	n := in.Rows.Tokens()
	if len(in.Old) != n || len(in.Rollout) != n || len(in.Mask) != n {
		return schema.BadInputf("rollout correction: old_logprob has %d tokens, rollout_logprob %d, action_mask %d; the rows hold %d",
			len(in.Old), len(in.Rollout), len(in.Mask), n)
	}
	return nil
}

// Corrector is a validated configuration, ready to run on record batches.
// It holds no per-batch state and may be used concurrently.
type Corrector struct {
	cfg        Config
	rules      []rule
	c, cLo     float64 // upper bound U (the TIS cap C) and Lo: IcePop's lower bound, or 1/C
	icePop     bool    // weights outside [Lo, U] are set to 0 (else truncated at U)
	lHi, lLo   float64 // float32 log(U), log(Lo): the sequence-level ratio fraction bounds
	seq        bool    // sequence-level weights
	stats      [4]bool // statistics the rules need (index Statistic)
	rowMaxNeed [4]bool // statistics a seq_max rule needs
	tokenRules []int   // indices of the token-level rules
}

// New validates cfg and returns its corrector.
func New(cfg Config) (*Corrector, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	rules, err := cfg.rules()
	if err != nil {
		return nil, err
	}
	c := &Corrector{cfg: cfg, rules: rules, seq: cfg.IS == "sequence"}
	if cfg.weighted() {
		b, err := parseISThreshold(cfg.ISThreshold)
		if err != nil {
			return nil, err
		}
		c.c, c.cLo, c.icePop = b.upper, 1/b.upper, b.icePop
		if b.icePop {
			c.cLo = b.lower
		}
		c.lHi = float64(float32(math.Log(float64(float32(c.c)))))
		c.lLo = float64(float32(math.Log(float64(float32(c.cLo)))))
	}
	for i, r := range rules {
		c.stats[r.Stat] = true
		if r.Level == Token {
			c.tokenRules = append(c.tokenRules, i)
		}
		if r.Level == SeqMax {
			c.rowMaxNeed[r.Stat] = true
		}
	}
	return c, nil
}

// Config returns the corrector's configuration.
func (c *Corrector) Config() Config { return c.cfg }

// Weighted reports whether the corrector writes IS weights.
func (c *Corrector) Weighted() bool { return c.cfg.weighted() }

// NeedsFirstPass reports whether Apply needs first-pass statistics: only
// batch normalisation of the weights (rollout_is_batch_normalize) depends
// on the whole batch before any weight can be written. The rejection mask
// and every metric are per-row work plus sums, computed in the one pass of
// Apply.
func (c *Corrector) NeedsFirstPass() bool { return c.cfg.weighted() && c.cfg.BatchNormalize }

// apply is a raw IS weight's applied value: IcePop keeps it within
// [Lo, U] and sets it to 0 outside (NaN too); TIS truncates it at U (NaN
// stays NaN).
func (c *Corrector) apply(raw float64) float64 {
	if c.icePop {
		if c.cLo <= raw && raw <= c.c {
			return raw
		}
		return 0
	}
	return min(raw, c.c)
}

// Norm is the first-pass statistic of batch normalisation, accumulated over
// every record batch with Observe: token level Σ w·m and Σ m of the
// applied (truncated or zeroed) weights; sequence level Σ of the valid
// rows' mean weights and the number of valid rows. The zero value is empty.
type Norm struct{ Sum, Count float64 }

// Merge adds another partial statistic.
func (n *Norm) Merge(o Norm) { n.Sum += o.Sum; n.Count += o.Count }

// factor returns the reciprocal of the normalisation divisor μ, by which
// Apply multiplies the applied weights: 1/μ when μ > 1e-8, else 1 (NaN
// does not normalise).
func (c *Corrector) factor(n *Norm) float64 {
	if mu, ok := c.mu(n); ok {
		return 1 / mu
	}
	return 1
}

// mu returns the normalisation divisor μ and whether it applies (μ > 1e-8).
func (c *Corrector) mu(n *Norm) (float64, bool) {
	if !c.NeedsFirstPass() || n == nil {
		return 1, false
	}
	var mu float64
	if c.seq {
		mu = n.Sum / math.Max(n.Count, eps)
	} else {
		mu = n.Sum / (n.Count + eps)
	}
	if mu > eps {
		return mu, true
	}
	return 1, false
}

// chunkRows is the number of rows one worker evaluates at a time; partial
// sums are merged in chunk order, so results do not depend on GOMAXPROCS.
const chunkRows = 256

// chunks runs fn over the rows of a batch in chunks of chunkRows, the
// chunks spread over the workers of package parallel: fn(sc, k, lo, hi)
// evaluates chunk k, rows lo..hi−1, with sc the scratch of the worker
// running it (newScratch(c)). There are ceil(rows/chunkRows) chunks.
func (c *Corrector) chunks(rows int, fn func(sc *scratch, k, lo, hi int)) {
	parallel.WithScratch((rows+chunkRows-1)/chunkRows, func() *scratch { return newScratch(c) },
		func(sc *scratch, k int) { fn(sc, k, k*chunkRows, min(rows, (k+1)*chunkRows)) })
}

// Observe is the first pass: it adds in's contribution to n. Only needed
// when NeedsFirstPass.
func (c *Corrector) Observe(n *Norm, in Input) error {
	if err := in.check(); err != nil {
		return err
	}
	if !c.NeedsFirstPass() {
		return nil
	}
	rows := in.Rows.N()
	parts := make([]Norm, (rows+chunkRows-1)/chunkRows)
	c.chunks(rows, func(_ *scratch, k, lo, hi int) {
		p := &parts[k]
		for b := lo; b < hi; b++ {
			t0, t1 := in.Rows.Span(b)
			m := in.Mask[t0:t1:t1]
			old, ro := in.Old[t0:t1:t1][:len(m)], in.Rollout[t0:t1:t1][:len(m)]
			if c.seq {
				c.observeSeq(p, old, ro, m)
			} else {
				c.observeToken(p, old, ro, m)
			}
		}
	})
	for _, p := range parts {
		n.Merge(p)
	}
	return nil
}

// observeSeq adds a row's mean weight w_b·n_b/(n_b+1e-8) to n when it has a
// valid token. The weight is apply(e^clamp(S_b)), S_b = Σ λ·m.
func (c *Corrector) observeSeq(n *Norm, old, ro, m []float64) {
	s, nb := 0.0, 0.0
	for t, mt := range m {
		s += (old[t] - ro[t]) * mt
		nb += mt
	}
	if math.IsNaN(s) || math.IsInf(s, 0) { // a non-finite λ, maybe masked: select first
		s = 0
		for t, mt := range m {
			s += sel(old[t]-ro[t], mt)
		}
	}
	if nb > 0 {
		w := c.apply(math.Exp(clamp(s, -safety, safety)))
		n.Sum += w * nb / (nb + eps)
		n.Count++
	}
}

// observeToken adds a row's Σ w·m and Σ m of the applied token weights
// w = apply(e^ℓ·m) to n.
func (c *Corrector) observeToken(n *Norm, old, ro, m []float64) {
	sum, cnt := 0.0, 0.0
	plain := true
	for t, mt := range m {
		lam := old[t] - ro[t]
		l := clamp(lam, -safety, safety)
		if l != lam {
			plain = false
		}
		w := c.apply(fastexp.Core(l) * mt)
		sum += w * mt
		cnt += mt
	}
	if !plain { // a NaN or clamped λ: select first, and NaN weights stay NaN
		sum = 0
		for t, mt := range m {
			l := clamp(old[t]-ro[t], -safety, safety)
			w := l
			if l == l {
				w = fastexp.Core(l) * mt
			}
			sum += sel(c.apply(w), mt)
		}
	}
	n.Sum += sum
	n.Count += cnt
}

// Apply is the second pass over one record batch: it writes the IS weights
// into weights (skipped when nil or !Weighted), the rejection-sampled mask
// into mask (m·Π keep), and adds the batch's metric contributions to acc.
// n holds the first-pass statistics (nil when !NeedsFirstPass). weights and
// mask have in's layout; mask may be in.Mask itself.
func (c *Corrector) Apply(in Input, n *Norm, weights, mask []float64, acc *Acc) error {
	if err := in.check(); err != nil {
		return err
	}
	if c.Weighted() && weights != nil && len(weights) != in.Rows.Tokens() || len(mask) != in.Rows.Tokens() {
		return schema.BadInputf("rollout correction: output buffers have %d weights and %d mask values for %d tokens",
			len(weights), len(mask), in.Rows.Tokens())
	}
	if !c.Weighted() {
		weights = nil
	}
	inv := c.factor(n)
	rows := in.Rows.N()
	parts := make([]Acc, (rows+chunkRows-1)/chunkRows)
	c.chunks(rows, func(sc *scratch, k, lo, hi int) {
		p := &parts[k]
		p.init(c)
		for b := lo; b < hi; b++ {
			c.row(in, b, inv, weights, mask, p, sc)
		}
	})
	acc.init(c)
	for k := range parts {
		acc.merge(&parts[k])
	}
	return nil
}

// Correct is verl's compute_rollout_correction_and_rejection_mask on one
// whole batch (both passes): the weights (nil without IS), the modified
// mask and the metrics under "rollout_corr/…". An all-masked batch is an
// error, as upstream.
func (c *Corrector) Correct(in Input) (weights, mask []float64, m agg.Metrics, err error) {
	if err := in.check(); err != nil {
		return nil, nil, nil, err
	}
	if agg.Count(in.Mask) == 0 {
		return nil, nil, nil, errNoValid
	}
	var n Norm
	if err := c.Observe(&n, in); err != nil {
		return nil, nil, nil, err
	}
	if c.Weighted() {
		weights = make([]float64, len(in.Mask))
	}
	mask = make([]float64, len(in.Mask))
	var acc Acc
	if err := c.Apply(in, &n, weights, mask, &acc); err != nil {
		return nil, nil, nil, err
	}
	m, err = c.Metrics(&acc, &n)
	return weights, mask, m, err
}
