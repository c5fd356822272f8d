package loss

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/internal/torch"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// ClipCov is the kernel of verl's clip_cov (spec verl_losses_2026.md §5):
//
//	λ = lp − old (not clamped), r = exp(λ)
//	P1 = −A·r, P2 = −A·clamp(r, 1−Low, 1+High), active = P2 > P1 ∧ m > 0
//	L = max(P1, P2)·corr·w, corr = 0 at the tokens Sel marks, else 1
//	∂L/∂lp = −A·r·[¬active]·corr·w
//
// Sel (flat over the window laid out by Off, whose row 0 is batch row First)
// is the batch-wide choice of covSelection. Seq as DPPO's. Sums: loss,
// Σ[corr = 0]·m, Σ(−λ)·m.
type ClipCov struct {
	Low, High float64
	Seq       bool
	Sel       []bool
	Off       []int
	First     int
}

// Sums implements tokens.Kernel.
func (k *ClipCov) Sums() int { return 3 }

// Row implements tokens.Kernel; the gradient is written at every token, as
// DPPO's (0·∂L/∂lp at a masked one: NaN where r overflowed).
func (k *ClipCov) Row(r *tokens.Row, s []float64) {
	lp := r.LP
	n := len(lp)
	old, adv, m, grad := r.Old[:n], r.Adv[:n], r.Mask[:n], r.Grad[:n]
	sel := k.Sel[k.Off[r.Index-k.First]:][:n]
	gs, lo, hi := r.GradScale, 1-k.Low, 1+k.High
	seq := k.Seq && r.Count > 0
	var sL, sClip, sKL float64
	for t, x := range lp {
		mt, a := m[t], adv[t]
		lam := x - old[t]
		ratio := exp(lam)
		cr, _ := torch.Clamp(ratio, lo, hi)
		p1, p2 := -a*ratio, -a*cr
		corr := b2f(!sel[t])
		wt := weight(r.Weights, t)
		if mt != 0 || seq {
			sL += max(p1, p2) * corr * wt * mt
		}
		// the exp backward multiplies by r last: 0·inf is NaN, as upstream
		g := -a * b2f(!(p2 > p1 && mt > 0)) * corr * wt * ratio
		if mt != 0 {
			sClip += (1 - corr) * mt
			sKL -= lam * mt
			grad[t] = gs * mt * g
		} else {
			grad[t] = 0 * g
		}
	}
	s[0] += r.Scale * sL
	s[1] += sClip
	s[2] += sKL
}

// Summary implements Kernel: pg_clipfrac (the covariance-clipped share),
// ppo_kl, pg_loss.
func (k *ClipCov) Summary(mode agg.Mode, r tokens.TermResult) (float64, agg.Metrics) {
	s, st := r.Sums, r.Stats
	loss := agg.Total(mode, st.Rows, s[0])
	return loss, agg.Metrics{"pg_clipfrac": st.MaskedMean(s[1]), "ppo_kl": st.MaskedMean(s[2]), "pg_loss": loss}
}

// KLCov is the kernel of verl's kl_cov (spec §6):
//
//	λ = lp − old (not clamped), r = exp(λ)
//	L = (−A·r + Coef·|λ|·[Sel])·w, ∂L/∂lp = (−A·r + Coef·sign(λ)·[Sel])·w
//
// Sel, Off, First and Seq as ClipCov's. Sums: loss, Σ|λ|·m.
type KLCov struct {
	Coef  float64
	Seq   bool
	Sel   []bool
	Off   []int
	First int
}

// Sums implements tokens.Kernel.
func (k *KLCov) Sums() int { return 2 }

// Row implements tokens.Kernel; the gradient is written at every token, as
// DPPO's.
func (k *KLCov) Row(r *tokens.Row, s []float64) {
	lp := r.LP
	n := len(lp)
	old, adv, m, grad := r.Old[:n], r.Adv[:n], r.Mask[:n], r.Grad[:n]
	sel := k.Sel[k.Off[r.Index-k.First]:][:n]
	gs, coef := r.GradScale, k.Coef
	seq := k.Seq && r.Count > 0
	var sL, sKL float64
	for t, x := range lp {
		mt, a := m[t], adv[t]
		lam := x - old[t]
		ratio := exp(lam)
		l, g := -a*ratio, -a*ratio
		if sel[t] {
			l += coef * math.Abs(lam)
			g += coef * sign(lam)
		}
		wt := weight(r.Weights, t)
		if mt != 0 || seq {
			sL += l * wt * mt
		}
		g *= wt
		if mt != 0 {
			sKL += math.Abs(lam) * mt
			grad[t] = gs * mt * g
		} else {
			grad[t] = 0 * g
		}
	}
	s[0] += r.Scale * sL
	s[1] += sKL
}

// Summary implements Kernel: ppo_kl (the mean absolute log-ratio, V26-06),
// pg_loss.
func (k *KLCov) Summary(mode agg.Mode, r tokens.TermResult) (float64, agg.Metrics) {
	loss := agg.Total(mode, r.Stats.Rows, r.Sums[0])
	return loss, agg.Metrics{"ppo_kl": r.Stats.MaskedMean(r.Sums[1]), "pg_loss": loss}
}

// covSelection is the batch-wide token choice of clip_cov or kl_cov over a
// batch handed over whole or in windows, in order: two statistics passes
// (observe 0 and 1 over every window), then mark, window by window,
// returns the chosen tokens of the window (flat over its tokens).
type covSelection interface {
	observe(pass int, b *tokens.Batch) error
	mark(b *tokens.Batch) ([]bool, error)
}

// covInputs returns the columns the selections read.
func covInputs(b *tokens.Batch) (lp, old, adv, m []float64) {
	return b.Col(tokens.LogProb), b.Col(tokens.OldLogProb), b.Col(tokens.Advantages), b.Col(tokens.ActionMask)
}

// clipCovSelection chooses clip_cov's clipped tokens: the candidates are
// the valid tokens, not PPO-active, with lb < cov < ub, where
// cov = (A − masked_mean(A))·(lp − masked_mean(lp)) over the batch, in
// row-major order; min(K, n) of the n candidates, K = max(int(ratio·N), 1),
// are clipped: those at perm[0..min(K,n)−1]. perm is the recorded
// permutation when fixed (conformance), else drawn from seed (only its
// first min(K, n) entries: memory O(K)).
type clipCovSelection struct {
	lo, hi, lb, ub, ratio float64
	seed                  uint64
	fixed                 bool
	perm                  []int
	sumA, sumLP, n        float64 // pass 0: masked sums and Σ m
	cands                 int     // pass 1: candidates
	chosen                []int   // the clipped candidates' ordinals, ascending (nil: not decided)
	seen, next            int     // candidates met in the windows marked; chosen[:next] met
}

// each calls f for every candidate of b, in row-major order (after pass 0).
func (s *clipCovSelection) each(b *tokens.Batch, f func(t int)) {
	lp, old, adv, m := covInputs(b)
	den := s.n + agg.Eps
	meanA, meanLP := s.sumA/den, s.sumLP/den
	for t, x := range lp {
		if !(m[t] > 0) {
			continue
		}
		a := adv[t]
		if cov := (a - meanA) * (x - meanLP); !(s.lb < cov && cov < s.ub) {
			continue
		}
		ratio := exp(x - old[t]) // the kernel's, so both agree on PPO-active
		cr, _ := torch.Clamp(ratio, s.lo, s.hi)
		if -a*cr > -a*ratio {
			continue
		}
		f(t)
	}
}

func (s *clipCovSelection) observe(pass int, b *tokens.Batch) error {
	if pass == 1 {
		s.each(b, func(int) { s.cands++ })
		return nil
	}
	lp, _, adv, m := covInputs(b)
	for t, mt := range m {
		if mt != 0 {
			s.sumA += adv[t] * mt
			s.sumLP += lp[t] * mt
		}
		s.n += mt
	}
	return nil
}

// decide picks the clipped candidates' ordinals (after pass 1).
func (s *clipCovSelection) decide() error {
	k := min(max(int(s.ratio*s.n), 1), s.cands)
	if s.fixed {
		if len(s.perm) != s.cands {
			return schema.BadInputf("clip_cov: the recorded permutation has %d entries, the batch has %d candidates", len(s.perm), s.cands)
		}
		seen := make([]bool, s.cands)
		for i, x := range s.perm {
			if x < 0 || x >= s.cands || seen[x] {
				return schema.BadInputf("clip_cov: the recorded permutation's entry %d (%d) is not a permutation of 0..%d", i, x, s.cands-1)
			}
			seen[x] = true
		}
		s.chosen = slices.Sorted(slices.Values(s.perm[:k]))
		return nil
	}
	s.chosen = make([]int, k)
	if k == s.cands { // every candidate, whatever the permutation
		for i := range s.chosen {
			s.chosen[i] = i
		}
		return nil
	}
	// The first k entries of a uniform permutation of the candidates: a
	// Fisher-Yates shuffle stopped after k swaps, the moved entries in a map.
	rng := rand.New(rand.NewPCG(s.seed, 0x636c69705f636f76))
	moved := map[int]int{}
	at := func(i int) int {
		if v, ok := moved[i]; ok {
			return v
		}
		return i
	}
	for i := range s.chosen {
		j := i + rng.IntN(s.cands-i)
		vi, vj := at(i), at(j)
		moved[i], moved[j] = vj, vi
		s.chosen[i] = vj
	}
	slices.Sort(s.chosen)
	return nil
}

func (s *clipCovSelection) mark(b *tokens.Batch) ([]bool, error) {
	if s.chosen == nil {
		if err := s.decide(); err != nil {
			return nil, err
		}
	}
	sel := make([]bool, b.Rows.Tokens())
	s.each(b, func(t int) {
		if s.next < len(s.chosen) && s.chosen[s.next] == s.seen {
			sel[t] = true
			s.next++
		}
		s.seen++
	})
	return sel, nil
}

// klCovSelection chooses kl_cov's penalised tokens: of the n valid tokens
// (m > 0), the k = max(1, int(n·ratio)) with the largest
// cov = (A − mean A)·(lp − mean lp), plain means over them; ties (and NaN,
// ranked highest as torch.topk does) go to the earlier token. k > n is
// torch.topk's error. Memory O(k): a heap of the k best so far.
type klCovSelection struct {
	ratio       float64
	sumA, sumLP float64 // pass 0
	n           int
	top         covHeap // pass 1
	k           int
	off         int   // tokens of the windows before, in the current pass
	chosen      []int // the penalised tokens' batch indices, ascending (nil: not decided)
	next        int
}

func (s *klCovSelection) observe(pass int, b *tokens.Batch) error {
	lp, _, adv, m := covInputs(b)
	if pass == 0 {
		for t, mt := range m {
			if mt > 0 {
				s.sumA += adv[t]
				s.sumLP += lp[t]
				s.n++
			}
		}
		return nil
	}
	if s.k == 0 && s.n > 0 {
		if s.k = max(1, int(float64(s.n)*s.ratio)); s.k > s.n {
			return schema.BadInputf("kl_cov: selected index k out of range (k = %d of %d valid tokens: kl_cov_ratio > 1)", s.k, s.n)
		}
		s.top = make(covHeap, 0, s.k)
	}
	meanA, meanLP := s.sumA/float64(s.n), s.sumLP/float64(s.n)
	for t, mt := range m {
		if !(mt > 0) {
			continue
		}
		c := covToken{cov: (adv[t] - meanA) * (lp[t] - meanLP), at: s.off + t}
		switch {
		case len(s.top) < s.k:
			heap.Push(&s.top, c)
		case s.top.less(s.top[0], c):
			s.top[0] = c
			heap.Fix(&s.top, 0)
		}
	}
	s.off += len(m)
	return nil
}

func (s *klCovSelection) mark(b *tokens.Batch) ([]bool, error) {
	if s.chosen == nil {
		s.chosen = make([]int, len(s.top))
		for i, c := range s.top {
			s.chosen[i] = c.at
		}
		slices.Sort(s.chosen)
		s.off = 0
	}
	sel := make([]bool, b.Rows.Tokens())
	for ; s.next < len(s.chosen) && s.chosen[s.next] < s.off+len(sel); s.next++ {
		sel[s.chosen[s.next]-s.off] = true
	}
	s.off += len(sel)
	return sel, nil
}

// covToken is a valid token's covariance and batch index.
type covToken struct {
	cov float64
	at  int
}

// covHeap is a min-heap of the best tokens: its root is the one a better
// token replaces.
type covHeap []covToken

// less orders by cov, NaN highest, then the later token first.
func (h covHeap) less(x, y covToken) bool {
	if x.cov == y.cov || math.IsNaN(x.cov) && math.IsNaN(y.cov) {
		return x.at > y.at
	}
	return x.cov < y.cov || math.IsNaN(y.cov)
}

func (h covHeap) Len() int           { return len(h) }
func (h covHeap) Less(i, j int) bool { return h.less(h[i], h[j]) }
func (h covHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *covHeap) Push(x any)        { *h = append(*h, x.(covToken)) }
func (h *covHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// covPlanner plans clip_cov or kl_cov: the selection over the batch, then
// the kernel with it.
type covPlanner struct {
	name   string
	newSel func() covSelection
	k      covKernel
	mode   agg.Mode
	global *agg.Global
}

// covKernel is ClipCov or KLCov: a kernel given each window's selection.
type covKernel interface {
	Kernel
	// window returns the kernel evaluating a window with selection sel.
	window(b *tokens.Batch, sel []bool) Kernel
}

func (k *ClipCov) window(b *tokens.Batch, sel []bool) Kernel {
	w := *k
	w.Sel, w.Off, w.First = sel, b.Rows.Off, b.First()
	return &w
}

func (k *KLCov) window(b *tokens.Batch, sel []bool) Kernel {
	w := *k
	w.Sel, w.Off, w.First = sel, b.Rows.Off, b.First()
	return &w
}

func (p covPlanner) plan(b *tokens.Batch) (*Plan, error) {
	if b.Totals().Rows[tokens.AllRows] != b.Rows.N() {
		return nil, bad("%s chooses its tokens over the whole batch: it cannot be evaluated on a window of %d rows of %d (use Loss.Stream)",
			p.name, b.Rows.N(), b.Totals().Rows[tokens.AllRows])
	}
	s := p.newSel()
	for pass := range 2 {
		if err := s.observe(pass, b); err != nil {
			return nil, err
		}
	}
	sel, err := s.mark(b)
	if err != nil {
		return nil, err
	}
	return single{k: p.k.window(b, sel), mode: p.mode, global: p.global}.plan(b)
}

// covStream is clip_cov's or kl_cov's Stream: the selection's two passes,
// then each window's kernel.
type covStream struct {
	p   covPlanner
	sel covSelection
	cur Kernel // the current window's
}

func (s *covStream) passes() int { return 2 }

func (s *covStream) observe(pass int, b *tokens.Batch) error {
	if err := b.Require(tokens.LogProb, tokens.OldLogProb, tokens.ActionMask, tokens.Advantages); err != nil {
		return err
	}
	return s.sel.observe(pass, b)
}

func (s *covStream) window(b *tokens.Batch) error {
	sel, err := s.sel.mark(b)
	if err == nil {
		s.cur = s.p.k.window(b, sel)
	}
	return err
}

func (s *covStream) plan() (*Plan, error) {
	return single{k: covWindow{s}, mode: s.p.mode, global: s.p.global}.plan(nil)
}

// covWindow is the kernel of a covStream: the current window's.
type covWindow struct{ s *covStream }

// Sums implements tokens.Kernel.
func (w covWindow) Sums() int { return w.s.p.k.Sums() }

// Row implements tokens.Kernel.
func (w covWindow) Row(r *tokens.Row, sums []float64) { w.s.cur.Row(r, sums) }

// Summary implements Kernel.
func (w covWindow) Summary(mode agg.Mode, r tokens.TermResult) (float64, agg.Metrics) {
	return w.s.p.k.Summary(mode, r)
}

// covParams are the arguments clip_cov and kl_cov share besides their own.
func covParams(own ...args.Param) args.Schema {
	return append(append(args.Schema(own), aggParam("token-mean")), globalParams...)
}

// clipCovDef is verl's clip_cov (compute_policy_loss_clip_cov).
func clipCovDef() *Def {
	return &Def{
		Name: "clip_cov",
		Params: covParams(append(actorClipParams(),
			actorParam("clip_cov_ratio", 0.0002, args.Positive, "share of the valid tokens clipped: K = max(int(ratio·N), 1)"),
			actorParam("clip_cov_lb", 1.0, args.Finite, "candidates have covariance > clip_cov_lb"),
			actorParam("clip_cov_ub", 5.0, args.Finite, "candidates have covariance < clip_cov_ub"),
			args.Param{Name: "seed", Kind: args.Int, Ctor: int64(0), Range: args.NonNeg,
				Doc: "seed of the random choice among the candidates (verl: torch's global generator)"},
		)...),
		Inputs:   []string{tokens.OldLogProb, tokens.ActionMask, tokens.Advantages},
		Weighted: true,
		CPUOnly:  true,
		build: func(v args.Values) (planner, error) {
			low, high, err := clipRange(v)
			if err != nil {
				return nil, err
			}
			md := mode(v, "loss_agg_mode")
			ratio, lb, ub, seed := v.Float("clip_cov_ratio"), v.Float("clip_cov_lb"), v.Float("clip_cov_ub"), uint64(v.Int("seed"))
			return covPlanner{
				name: "clip_cov",
				newSel: func() covSelection {
					return &clipCovSelection{lo: 1 - low, hi: 1 + high, lb: lb, ub: ub, ratio: ratio, seed: seed}
				},
				k: &ClipCov{Low: low, High: high, Seq: md != agg.TokenMean}, mode: md, global: verlGlobal(v),
			}, nil
		},
	}
}

// klCovDef is verl's kl_cov (compute_policy_loss_kl_cov).
func klCovDef() *Def {
	return &Def{
		Name: "kl_cov",
		Params: covParams(
			actorParam("kl_cov_ratio", 0.0002, args.Positive, "share of the valid tokens penalised: k = max(1, int(n·ratio)), the largest covariances"),
			actorParam("ppo_kl_coef", 0.1, args.Finite, "coefficient κ of the penalty κ·|lp − old| on the chosen tokens"),
		),
		Inputs:   []string{tokens.OldLogProb, tokens.ActionMask, tokens.Advantages},
		Weighted: true,
		CPUOnly:  true,
		build: func(v args.Values) (planner, error) {
			md := mode(v, "loss_agg_mode")
			ratio := v.Float("kl_cov_ratio")
			return covPlanner{
				name:   "kl_cov",
				newSel: func() covSelection { return &klCovSelection{ratio: ratio} },
				k:      &KLCov{Coef: v.Float("ppo_kl_coef"), Seq: md != agg.TokenMean}, mode: md, global: verlGlobal(v),
			}, nil
		},
	}
}

// WithPermutation returns clip_cov l choosing its clipped candidates by the
// recorded permutation perm (torch.randperm's; nil when it drew none)
// instead of one drawn from its seed: the conformance runner replays a
// reference call with it.
func (l *Loss) WithPermutation(perm []int) (*Loss, error) {
	p, ok := l.p.(covPlanner)
	if !ok || p.name != "clip_cov" {
		return nil, fmt.Errorf("policy loss %s draws no permutation", l.Def.Name)
	}
	inner := p.newSel
	p.newSel = func() covSelection {
		s := inner().(*clipCovSelection)
		s.fixed, s.perm = true, perm
		return s
	}
	return &Loss{Def: l.Def, Args: l.Args, p: p}, nil
}
