package loss

import (
	"math"
	"sync/atomic"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/internal/torch"
	"github.com/rftpipe/rftpipe/stages/parallel"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// M2POStats are the statistics of an M2PO mask selection (upstream's
// m2_before, m2_after, masked_fraction, trust_region_fraction; float32).
type M2POStats struct {
	M2Before, M2After, MaskedFraction, TrustRegionFraction float64
}

// Metrics returns the statistics under the names m2po/<name>.
func (s M2POStats) Metrics() agg.Metrics {
	return agg.Metrics{"m2po/m2_before": s.M2Before, "m2po/m2_after": s.M2After,
		"m2po/masked_fraction": s.MaskedFraction, "m2po/trust_region_fraction": s.TrustRegionFraction}
}

// M2POMask selects the tokens of batch b (one optimizer mini-batch) that
// M2PO trains on: the valid tokens (action_mask ≠ 0) minus the trust-region
// tokens (A > 0 ∧ lr > 0, or A < 0 ∧ lr < 0) with the largest float32
// second moments lr², dropped until the mean of the rest is at most
// threshold (stable ascending sort, float32 running means). keep is flat
// over b's tokens. A non-finite log-ratio at a valid token is an error.
func M2POMask(b *tokens.Batch, threshold float64) (keep []bool, st M2POStats, err error) {
	if err := b.Require(tokens.LogProb, tokens.OldLogProb, tokens.ActionMask, tokens.Advantages); err != nil {
		return nil, st, err
	}
	lp, old, m, adv := b.Col(tokens.LogProb), b.Col(tokens.OldLogProb), b.Col(tokens.ActionMask), b.Col(tokens.Advantages)
	keep = make([]bool, len(lp))
	c, err := countTrust(lp, old, m, adv, keep)
	if err != nil {
		return nil, st, err
	}
	valid, n, sum := c.totals()
	st.M2Before = mean32(sum, n)
	kept := n
	if n > 0 && st.M2Before > threshold {
		idx, v := c.trustTokens(lp, old, m, adv, n)
		var rest float64
		kept, rest = dropAbove(idx, v, threshold, keep)
		st.M2After = mean32(rest, kept)
	} else {
		st.M2After = st.M2Before
	}
	if valid > 0 {
		st.MaskedFraction = float64(n-kept) / float64(valid)
		st.TrustRegionFraction = float64(n) / float64(valid)
	}
	return keep, st, nil
}

// mean32 is s/n rounded to float32, 0 when n is 0.
func mean32(s float64, n int) float64 {
	if n == 0 {
		return 0
	}
	return float64(float32(s / float64(n)))
}

// trustCounts are, per span of parallel.SpanSize tokens, the valid and
// trust-region tokens and the trust-region tokens' second-moment sum.
type trustCounts struct {
	nValid, nTrust []int
	sums           []float64
}

// countTrust is the first pass over the cores: it counts each span's
// tokens (trustCounts) and sets keep on the valid ones.
func countTrust(lp, old, m, adv []float64, keep []bool) (trustCounts, error) {
	spans := (len(lp) + parallel.SpanSize - 1) / parallel.SpanSize
	c := trustCounts{nValid: make([]int, spans), nTrust: make([]int, spans), sums: make([]float64, spans)}
	var bad atomic.Bool
	parallel.For(spans, func(k int) {
		lo, hi := k*parallel.SpanSize, min((k+1)*parallel.SpanSize, len(lp))
		valid, n, sum := 0, 0, 0.0
		for t := lo; t < hi; t++ {
			if m[t] == 0 {
				continue
			}
			lr := lp[t] - old[t]
			if math.IsNaN(lr) || math.IsInf(lr, 0) {
				bad.Store(true)
				return
			}
			keep[t] = true
			valid++
			if bits, ok := trustBits(lr, adv[t]); ok {
				n++
				sum += float64(math.Float32frombits(bits))
			}
		}
		c.nValid[k], c.nTrust[k], c.sums[k] = valid, n, sum
	})
	if bad.Load() {
		return c, errNonFiniteRatio()
	}
	return c, nil
}

// totals sums the spans' counts, in span order.
func (c trustCounts) totals() (valid, trust int, sum float64) {
	for k := range c.nValid {
		valid += c.nValid[k]
		trust += c.nTrust[k]
		sum += c.sums[k]
	}
	return valid, trust, sum
}

// trustTokens is the second pass over the cores, run only when tokens are
// to be dropped: it returns the n trust-region tokens and their second
// moments' bits in store order, each span writing at its offset.
func (c trustCounts) trustTokens(lp, old, m, adv []float64, n int) (idx []int, v []uint32) {
	off := make([]int, len(c.nTrust))
	at := 0
	for k, nk := range c.nTrust {
		off[k] = at
		at += nk
	}
	idx, v = make([]int, n), make([]uint32, n)
	parallel.For(len(off), func(k int) {
		lo, hi := k*parallel.SpanSize, min((k+1)*parallel.SpanSize, len(lp))
		j := off[k]
		for t := lo; t < hi; t++ {
			if m[t] == 0 {
				continue
			}
			if bits, ok := trustBits(lp[t]-old[t], adv[t]); ok {
				idx[j], v[j] = t, bits
				j++
			}
		}
	})
	return idx, v
}

// dropAbove keeps the longest prefix of the trust-region tokens, in
// ascending order of second moment, whose mean is at most threshold, and
// clears keep for the others. It returns the tokens kept and their sum.
func dropAbove(idx []int, v []uint32, threshold float64, keep []bool) (kept int, sum float64) {
	// Second moments are float32 values >= 0, ordered as their bits:
	// a stable radix sort is upstream's stable ascending sort.
	idx, v = radixSort(idx, v)
	var cum float32
	for k, x := range v {
		cum += math.Float32frombits(x)
		if float64(cum/float32(k+1)) <= threshold {
			kept = k + 1
		}
	}
	for k, x := range v {
		if k >= kept {
			keep[idx[k]] = false
		} else {
			sum += float64(math.Float32frombits(x))
		}
	}
	return kept, sum
}

// radixSort sorts the keys v (with their indices idx) ascending, stably:
// two counting passes of 16 bits each.
func radixSort(idx []int, v []uint32) ([]int, []uint32) {
	idx2, v2 := make([]int, len(idx)), make([]uint32, len(v))
	count := make([]int, 1<<16)
	for shift := uint(0); shift < 32; shift += 16 {
		clear(count)
		for _, x := range v {
			count[x>>shift&0xffff]++
		}
		pos := 0
		for d, c := range count {
			count[d] = pos
			pos += c
		}
		for i, x := range v {
			d := x >> shift & 0xffff
			idx2[count[d]], v2[count[d]] = idx[i], x
			count[d]++
		}
		idx, v, idx2, v2 = idx2, v2, idx, v
	}
	return idx, v
}

// M2PO is the kernel of M2PO's surrogate: with lr = lp − old and the
// straight-through clamp c = clamp(lr, ±Clip) (value c, gradient of lr),
// L = −A·exp(c) on the tokens Keep selects (flat over the batch laid out by
// Off, whose row 0 is batch row First), 0 elsewhere; with Keep nil, on the
// valid tokens but the trust-region ones whose second moment's bits are at
// least Cut. Sums: loss, Σ exp(c)·m, Σ(−c)·m.
type M2PO struct {
	Clip  float64
	Keep  []bool
	Cut   uint32
	Off   []int
	First int
}

// m2poKeepAll is the Cut that drops no token: above every float32 bit
// pattern of a value >= 0.
const m2poKeepAll = math.MaxUint32

// Sums implements tokens.Kernel.
func (k *M2PO) Sums() int { return 3 }

// Row implements tokens.Kernel.
func (k *M2PO) Row(r *tokens.Row, s []float64) {
	lp := r.LP
	n := len(lp)
	old, adv, m, grad := r.Old[:n], r.Adv[:n], r.Mask[:n], r.Grad[:n]
	var keep []bool
	if k.Keep != nil {
		keep = k.Keep[k.Off[r.Index-k.First]:][:n]
	}
	gs := r.GradScale
	var sL, sRatio, sKL float64
	for t, x := range lp {
		mt := m[t]
		if mt == 0 {
			grad[t] = 0
			continue
		}
		lr := x - old[t]
		c, _ := torch.Clamp(lr, -k.Clip, k.Clip)
		ratio := exp(c)
		l := 0.0
		if keep != nil && keep[t] || keep == nil && !k.dropped(lr, adv[t]) {
			l = -adv[t] * ratio
		}
		sL += l * mt
		sRatio += ratio * mt
		sKL -= c * mt
		grad[t] = gs * mt * l // straight-through: ∂exp(c)/∂lp = exp(c)
	}
	s[0] += r.Scale * sL
	s[1] += sRatio
	s[2] += sKL
}

// dropped reports whether a valid token with log-ratio lr and advantage a
// is a trust-region token at or above Cut.
func (k *M2PO) dropped(lr, a float64) bool {
	bits, ok := trustBits(lr, a)
	return ok && bits >= k.Cut
}

// Summary implements Kernel: pg_loss, ppo_kl, ratio/mean.
func (k *M2PO) Summary(mode agg.Mode, r tokens.TermResult) (float64, agg.Metrics) {
	s, st := r.Sums, r.Stats
	loss := agg.Total(mode, st.Rows, s[0])
	return loss, agg.Metrics{"pg_loss": loss, "ppo_kl": st.MaskedMean(s[2]), "ratio/mean": st.MaskedMean(s[1])}
}

// m2poPlanner computes the mask over the batch it is handed (one optimizer
// mini-batch, Q-56) and evaluates the surrogate.
type m2poPlanner struct {
	threshold, clip float64
	global          *agg.Global
}

func (p m2poPlanner) plan(b *tokens.Batch) (*Plan, error) {
	if b.Totals().Rows[tokens.AllRows] != b.Rows.N() {
		return nil, bad("m2po selects its tokens over the whole mini-batch: it cannot be evaluated on a window of %d rows of %d", b.Rows.N(), b.Totals().Rows[tokens.AllRows])
	}
	keep, st, err := M2POMask(b, p.threshold)
	if err != nil {
		return nil, err
	}
	return p.planMask(b, keep, st), nil
}

// planMask evaluates the surrogate on b with a given mask (keep flat over
// b's tokens) and adds the selection's statistics st to the metrics.
func (p m2poPlanner) planMask(b *tokens.Batch, keep []bool, st M2POStats) *Plan {
	k := &M2PO{Clip: p.clip, Keep: keep, Off: b.Rows.Off}
	return &Plan{
		Terms: []tokens.Term{{Kernel: k, Rows: tokens.AllRows, Mode: agg.TokenMean, Coef: 1, Global: p.global}},
		Finish: func(res []tokens.TermResult) (Outcome, error) {
			v, m := k.Summary(agg.TokenMean, res[0])
			for name, x := range st.Metrics() {
				m[name] = x
			}
			return Outcome{Loss: v, Metrics: m}, nil
		},
	}
}

// m2poMinTokens is the floor of upstream's denominator
// max(float(batch_num_tokens), 1e-8).
const m2poMinTokens = 1e-8

func m2poDef() *Def {
	return &Def{
		Name: "m2po",
		Params: args.Schema{
			{Name: "m2_threshold", Kind: args.Float, Ctor: 0.04, Default: 0.04, InDefaults: true,
				Doc: "bound on the mean second moment lr² of the kept trust-region tokens, >= 0", Range: schema.NonNeg},
			aggParam("token-mean"),
			{Name: "log_ratio_clip", Kind: args.Float, Ctor: 20.0, Default: 20.0, InDefaults: true,
				Doc: "straight-through clamp of the log-ratio before exp, > 0", Range: schema.Positive},
			// The loss call's keyword arguments, as upstream checks them.
			{Name: "batch_num_tokens", Kind: args.Float, Range: schema.NonNeg, Nullable: true,
				Doc: "the engine's token count of the mini-batch: the denominator max(batch_num_tokens, 1e-8), times dp_size (null: the masked mean)"},
			{Name: "dp_size", Kind: args.Int, Range: schema.AtLeast1, Nullable: true,
				Doc: "data-parallel world size, a factor with batch_num_tokens (null: 1)"},
		},
		Inputs:  []string{tokens.OldLogProb, tokens.ActionMask, tokens.Advantages},
		CPUOnly: true,
		build: func(v args.Values) (planner, error) {
			p := m2poPlanner{threshold: v.Float("m2_threshold"), clip: v.Float("log_ratio_clip")}
			if n, ok := v.OptFloat("batch_num_tokens"); ok {
				dp, _ := v["dp_size"].(int64) // 0 (null) is 1 for agg.Global
				p.global = &agg.Global{DPSize: int(dp), BatchNumTokens: max(n, m2poMinTokens)}
			}
			// The ranges hold upstream's checks (finite, >= 0 and > 0).
			if v.String("loss_agg_mode") != "token-mean" {
				return nil, bad("M2PO requires loss_agg_mode='token-mean' to preserve the paper's original valid-token denominator.")
			}
			return p, nil
		},
	}
}

// m2poStream selects M2PO's tokens over a batch handed over in windows, in
// bounded memory: the trust-region second moments are float32 values >= 0,
// ordered as their bit patterns, so a radix selection finds the cut — pass 0
// counts and sums them by their high 16 bits, then the low 16 bits are
// counted inside the bin where the running mean crosses the threshold — and
// each window then keeps the tokens below the cut value and the first tied
// ones in store order. The crossing bin lies at or above the threshold's
// bin (a prefix of values at most the threshold has a mean at most the
// threshold), so pass 0 also holds the bits of the values in those bins, up
// to m2poHeld of them, and counts the low bits from them; only a store with
// more such values takes pass 1, which reads them again. The running means
// are float64 sums (upstream: a float32 cumulative sum), which select the
// same tokens unless a prefix mean lies within float32 rounding of the
// threshold.
type m2poStream struct {
	p          m2poPlanner
	valid      int64
	n          int64
	sum        float64
	hi         []m2poBin  // 1<<16 bins by the high bits (pass 0)
	held       [][]uint32 // pass 0: the values in the bins from the threshold's up, in chunks, while at most m2poHeld
	nHeld      int        // the values held
	overflowed bool       // pass 0 met more than m2poHeld of them: pass 1 counts the low bits
	lo         []int64    // 1<<16 counts by the low bits of bin
	bits       []uint32   // a window's trust-region second moments (trust), reused
	bin        int        // the crossing bin, -1: nothing is dropped
	below      m2poBin    // the bins below it
	decided    bool       // pass 0 turned into bin
	selected   bool       // the low bits turned into cut and ties
	cut        uint32     // bit pattern of the cut value
	ties       int64      // tokens at the cut value that are kept
	seen       int64      // tokens at the cut value met so far
	kept       int64
	keptSum    float64
	cur        M2PO
	st         M2POStats
}

// m2poHeld is the most second moments (4 bytes each) an m2poStream holds
// from pass 0 to find the cut without a second pass: 16 MiB.
var m2poHeld = 1 << 22

type m2poBin struct {
	n int64
	s float64
}

// passes is 1, and 2 once pass 0 has met more values than it holds.
func (s *m2poStream) passes() int {
	if s.overflowed {
		return 2
	}
	return 1
}

// trust appends to bits, in store order, the float32 second moments' bits
// of the valid trust-region tokens of b (action_mask ≠ 0), and returns
// them with the number of valid tokens; a non-finite log-ratio at a valid
// token is an error. The log-probs and advantages are read as float32
// where all three were set so (tokens.Batch.Set32; their float64 values
// give the log-ratio of the converted inputs), else as float64.
func trust(b *tokens.Batch, bits []uint32) ([]uint32, int64, error) {
	if err := b.Require(tokens.LogProb, tokens.OldLogProb, tokens.ActionMask, tokens.Advantages); err != nil {
		return bits, 0, err
	}
	m := b.Col(tokens.ActionMask)
	if lp, old, adv := b.Col32(tokens.LogProb), b.Col32(tokens.OldLogProb), b.Col32(tokens.Advantages); lp != nil && old != nil && adv != nil {
		return trustOf(lp, old, adv, m, bits)
	}
	lp, old, adv := b.Col(tokens.LogProb), b.Col(tokens.OldLogProb), b.Col(tokens.Advantages)
	if lp == nil || old == nil || adv == nil {
		return bits, 0, bad("m2po takes %s, %s and %s all as float64 or all as float32", tokens.LogProb, tokens.OldLogProb, tokens.Advantages)
	}
	return trustOf(lp, old, adv, m, bits)
}

// trustOf is trust over the inputs' values.
func trustOf[T float32 | float64](lp, old, adv []T, m []float64, bits []uint32) ([]uint32, int64, error) {
	old, adv, m = old[:len(lp)], adv[:len(lp)], m[:len(lp)]
	var valid int64
	for t := range lp {
		if m[t] == 0 {
			continue
		}
		lr := float64(lp[t]) - float64(old[t])
		if math.IsNaN(lr) || math.IsInf(lr, 0) {
			return bits, valid, errNonFiniteRatio()
		}
		valid++
		if x, ok := trustBits(lr, float64(adv[t])); ok {
			bits = append(bits, x)
		}
	}
	return bits, valid, nil
}

// trustBits reports whether a valid token with log-ratio lr and advantage a
// is in the trust region (A > 0 ∧ lr > 0, or A < 0 ∧ lr < 0), and the bits
// of its float32 second moment.
func trustBits(lr, a float64) (uint32, bool) {
	if a > 0 && lr > 0 || a < 0 && lr < 0 {
		x := float32(lr)
		return math.Float32bits(x * x), true
	}
	return 0, false
}

// errNonFiniteRatio is upstream's error for a non-finite log-ratio at a
// valid token.
func errNonFiniteRatio() error {
	return schema.BadInputf("M2PO received non-finite log-probability ratios.")
}

func (s *m2poStream) observe(pass int, b *tokens.Batch) error {
	if pass == 0 {
		return s.count(b)
	}
	s.decide()
	if s.bin < 0 {
		return nil
	}
	var err error
	s.bits, _, err = trust(b, s.bits[:0])
	for _, x := range s.bits {
		s.countLow(x)
	}
	return err
}

// count is pass 0 over window b: the valid and trust-region tokens, the
// high-bit bins, and the values held for the low bits.
func (s *m2poStream) count(b *tokens.Batch) error {
	if s.hi == nil {
		s.hi = make([]m2poBin, 1<<16)
	}
	from := s.fromBin()
	var valid int64
	var err error
	s.bits, valid, err = trust(b, s.bits[:0])
	for _, bits := range s.bits {
		v := float64(math.Float32frombits(bits))
		h := &s.hi[bits>>16]
		h.n++
		h.s += v
		s.n++
		s.sum += v
		switch {
		case bits>>16 < from || s.overflowed:
		case s.nHeld == m2poHeld:
			s.held, s.overflowed = nil, true
		default:
			s.hold(bits)
		}
	}
	s.valid += valid
	return err
}

// hold keeps a value's bits: in chunks of 1<<16, which fill without the
// copies of a growing slice.
func (s *m2poStream) hold(bits uint32) {
	if k := len(s.held) - 1; k < 0 || len(s.held[k]) == cap(s.held[k]) {
		s.held = append(s.held, make([]uint32, 0, 1<<16))
	}
	k := len(s.held) - 1
	s.held[k] = append(s.held[k], bits)
	s.nHeld++
}

// fromBin is the threshold's bin, that of float32(threshold): every value
// in a bin below it is below the threshold (float32 rounds to nearest), so
// the crossing bin is no lower.
func (s *m2poStream) fromBin() uint32 { return math.Float32bits(float32(s.p.threshold)) >> 16 }

// countLow counts a value's low bits if it lies in the crossing bin.
func (s *m2poStream) countLow(bits uint32) {
	if s.lo == nil {
		s.lo = make([]int64, 1<<16)
	}
	if int(bits>>16) == s.bin {
		s.lo[bits&0xffff]++
	}
}

// decide ends pass 0: the statistics before the selection and the bin in
// which the running mean of the sorted second moments crosses the threshold.
func (s *m2poStream) decide() {
	if s.decided {
		return
	}
	s.decided, s.bin = true, -1
	s.kept, s.keptSum = s.n, s.sum
	if s.n == 0 {
		return
	}
	s.st.M2Before = float64(float32(s.sum / float64(s.n)))
	if s.st.M2Before <= s.p.threshold {
		return
	}
	var acc m2poBin
	from := int(s.fromBin())
	for b, h := range s.hi {
		if h.n == 0 {
			continue
		}
		if b >= from && (acc.s+h.s)/float64(acc.n+h.n) > s.p.threshold {
			s.bin, s.below = b, acc
			return
		}
		acc.n += h.n
		acc.s += h.s
	}
}

// selectCut ends the statistics passes: the cut value and how many tokens at it are kept.
func (s *m2poStream) selectCut() {
	if s.selected {
		return
	}
	s.decide()
	s.selected = true
	if s.bin < 0 {
		return
	}
	if !s.overflowed {
		for _, c := range s.held {
			for _, bits := range c {
				s.countLow(bits)
			}
		}
		s.held = nil
	}
	thr := s.p.threshold
	n, sum := float64(s.below.n), s.below.s
	for l, cnt := range s.lo {
		if cnt == 0 {
			continue
		}
		bits := uint32(s.bin)<<16 | uint32(l)
		v := float64(math.Float32frombits(bits))
		k := cnt
		if v > thr {
			k = min(cnt, max(0, int64(math.Floor((thr*n-sum)/(v-thr)))))
		}
		n += float64(k)
		sum += float64(k) * v
		if k < cnt {
			s.cut, s.ties = bits, k
			s.kept, s.keptSum = int64(n), sum
			return
		}
	}
	s.bin = -1 // no token to drop after all
}

func (s *m2poStream) stats() M2POStats {
	st := s.st
	st.M2After = st.M2Before
	if s.bin >= 0 {
		st.M2After = 0
		if s.kept > 0 {
			st.M2After = float64(float32(s.keptSum / float64(s.kept)))
		}
	}
	if s.valid > 0 {
		st.MaskedFraction = float64(s.n-s.kept) / float64(s.valid)
		st.TrustRegionFraction = float64(s.n) / float64(s.valid)
	}
	return st
}

// window sets the kept tokens of window b: the valid ones but those above
// the cut value and the tied ones past the kept ties. Once the windows
// before met every kept tie (at once when none is kept), the kernel drops
// the tokens from the cut value up itself; before, a mask (pass 0 found
// every log-ratio finite).
func (s *m2poStream) window(b *tokens.Batch) error {
	s.selectCut()
	s.cur = M2PO{Clip: s.p.clip, Cut: m2poKeepAll, Off: b.Rows.Off, First: b.First()}
	switch {
	case s.bin < 0:
		return nil
	case s.seen >= s.ties:
		s.cur.Cut = s.cut
		return nil
	}
	if err := b.Require(tokens.LogProb, tokens.OldLogProb, tokens.ActionMask, tokens.Advantages); err != nil {
		return err
	}
	lp, old, m, adv := b.Col(tokens.LogProb), b.Col(tokens.OldLogProb), b.Col(tokens.ActionMask), b.Col(tokens.Advantages)
	keep := make([]bool, len(m))
	for t, mt := range m {
		if mt == 0 {
			continue
		}
		bits, ok := trustBits(lp[t]-old[t], adv[t])
		switch {
		case !ok || bits < s.cut:
			keep[t] = true
		case bits == s.cut:
			keep[t] = s.seen < s.ties
			s.seen++
		}
	}
	s.cur.Keep = keep
	return nil
}

func (s *m2poStream) plan() (*Plan, error) {
	st := s.stats()
	k := m2poWindow{s}
	return &Plan{
		Terms: []tokens.Term{{Kernel: k, Rows: tokens.AllRows, Mode: agg.TokenMean, Coef: 1, Global: s.p.global}},
		Finish: func(res []tokens.TermResult) (Outcome, error) {
			v, m := s.cur.Summary(agg.TokenMean, res[0])
			for name, x := range st.Metrics() {
				m[name] = x
			}
			return Outcome{Loss: v, Metrics: m}, nil
		},
	}, nil
}

// m2poWindow is the kernel of an m2poStream: the current window's.
type m2poWindow struct{ s *m2poStream }

// Sums implements tokens.Kernel.
func (w m2poWindow) Sums() int { return w.s.cur.Sums() }

// Row implements tokens.Kernel.
func (w m2poWindow) Row(r *tokens.Row, s []float64) { w.s.cur.Row(r, s) }
