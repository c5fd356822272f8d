package loss

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/internal/fastexp"
	"github.com/rftpipe/rftpipe/stages/internal/torch"
	"github.com/rftpipe/rftpipe/stages/parallel"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// ClipCov is the kernel of verl's clip_cov (spec verl_losses_2026.md §5):
//
//	λ = lp − old (not clamped), r = exp(λ)
//	P1 = −A·r, P2 = −A·clamp(r, 1−Low, 1+High), active = P2 > P1 ∧ m > 0
//	L = max(P1, P2)·corr·w, corr = 0 at the clipped candidates, else 1
//	∂L/∂lp = −A·r·[¬active]·corr·w
//
// The candidates are the tokens with m > 0, not active, and
// LB < (A − MeanA)·(lp − MeanLP) < UB, numbered in row-major order over the
// batch from 0: Base holds the number of the first candidate of each row
// (batch row First + i at Base[i]), Chosen the clipped candidates' numbers,
// ascending (covSelection's choice). Seq as DPPO's. Sums: loss,
// Σ[corr = 0]·m, Σ(−λ)·m.
type ClipCov struct {
	Low, High     float64
	Seq           bool
	MeanA, MeanLP float64
	LB, UB        float64
	Base          []int
	First         int
	Chosen        []int
}

// Sums implements tokens.Kernel.
func (k *ClipCov) Sums() int { return 3 }

// inWindow reports whether a token's covariance is within (LB, UB).
func (k *ClipCov) inWindow(x, a float64) bool {
	cov := (a - k.MeanA) * (x - k.MeanLP)
	return k.LB < cov && cov < k.UB
}

// Row implements tokens.Kernel; the gradient is written at every token, as
// DPPO's (0·∂L/∂lp at a masked one: NaN where r overflowed).
func (k *ClipCov) Row(r *tokens.Row, s []float64) {
	lp := r.LP
	n := len(lp)
	old, adv, m, grad := r.Old[:n], r.Adv[:n], r.Mask[:n], r.Grad[:n]
	gs, lo, hi := r.GradScale, 1-k.Low, 1+k.High
	seq := k.Seq && r.Count > 0
	ord := k.Base[r.Index-k.First] // the number of the row's next candidate
	chosen := k.Chosen
	j, _ := slices.BinarySearch(chosen, ord) // chosen[j]: the next clipped one
	var sL, sClip, sKL float64
	for t, x := range lp {
		mt, a := m[t], adv[t]
		lam := x - old[t]
		ratio := 0.0 // fastexp.Core inlined where in its range
		if lam > -708 && lam < 709 {
			ratio = fastexp.Core(lam)
		} else {
			ratio = exp(lam)
		}
		cr, _ := torch.Clamp(ratio, lo, hi)
		p1, p2 := -a*ratio, -a*cr
		l := p1 // max(P1, P2): P2 is NaN only where P1 is
		if p2 > p1 {
			l = p2
		}
		active := p2 > p1 && mt > 0
		corr := 1.0
		if mt > 0 && !active && k.inWindow(x, a) {
			if j < len(chosen) && chosen[j] == ord {
				corr = 0
				j++
			}
			ord++
		}
		wt := weight(r.Weights, t)
		if mt != 0 || seq {
			sL += l * corr * wt * mt
		}
		// the exp backward multiplies by r last: 0·inf is NaN, as upstream
		g := -a * b2f(!active) * corr * wt * ratio
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
//	L = (−A·r + Coef·|λ|·[selected])·w, ∂L/∂lp = (−A·r + Coef·sign(λ)·[selected])·w
//
// Chosen holds the selected tokens' indices in the batch, ascending, and
// Start the batch index of each row's first token (batch row First + i at
// Start[i]): covSelection's choice. Seq as DPPO's. Sums: loss, Σ|λ|·m.
type KLCov struct {
	Coef   float64
	Seq    bool
	Start  []int
	First  int
	Chosen []int
}

// Sums implements tokens.Kernel.
func (k *KLCov) Sums() int { return 2 }

// Row implements tokens.Kernel; the gradient is written at every token, as
// DPPO's.
func (k *KLCov) Row(r *tokens.Row, s []float64) {
	lp := r.LP
	n := len(lp)
	old, adv, m, grad := r.Old[:n], r.Adv[:n], r.Mask[:n], r.Grad[:n]
	gs, coef := r.GradScale, k.Coef
	seq := k.Seq && r.Count > 0
	start := k.Start[r.Index-k.First]
	chosen := k.Chosen
	j, _ := slices.BinarySearch(chosen, start)
	next := -1 // the row's next selected token
	if j < len(chosen) {
		next = chosen[j] - start
	}
	var sL, sKL float64
	for t, x := range lp {
		mt, a := m[t], adv[t]
		lam := x - old[t]
		ratio := 0.0 // fastexp.Core inlined where in its range
		if lam > -708 && lam < 709 {
			ratio = fastexp.Core(lam)
		} else {
			ratio = exp(lam)
		}
		l, g := -a*ratio, -a*ratio
		if t == next {
			l += coef * math.Abs(lam)
			g += coef * sign(lam)
			if j++; j < len(chosen) {
				next = chosen[j] - start
			}
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
// (observe 0 and 1 over every window), then kernel, the loss kernel with
// the choice, which evaluates every window. The passes run over the cores
// a run of rows at a time; their sums add each row's own (summed in token
// order) in row order, so neither GOMAXPROCS nor the windows change a bit.
type covSelection interface {
	observe(pass int, b *tokens.Batch) error
	kernel() (Kernel, error)
}

// covInputs returns the columns the selections read.
func covInputs(b *tokens.Batch) (lp, old, adv, m []float64) {
	return b.Col(tokens.LogProb), b.Col(tokens.OldLogProb), b.Col(tokens.Advantages), b.Col(tokens.ActionMask)
}

// overRows calls f(r, lo, hi) for every row r of b, its tokens [lo, hi),
// runs of rows of about parallel.SpanSize tokens spread over the cores: f
// writes row r's results alone.
func overRows(b *tokens.Batch, f func(r, lo, hi int)) {
	runs := b.Rows.Chunks(parallel.SpanSize)
	parallel.For(len(runs)-1, func(c int) {
		for r := runs[c]; r < runs[c+1]; r++ {
			lo, hi := b.Rows.Span(r)
			f(r, lo, hi)
		}
	})
}

// clipCovSelection chooses clip_cov's clipped tokens: the candidates are
// the valid tokens, not PPO-active, with lb < cov < ub, where
// cov = (A − masked_mean(A))·(lp − masked_mean(lp)) over the batch, in
// row-major order; min(K, n) of the n candidates, K = max(int(ratio·N), 1),
// are clipped: those at perm[0..min(K,n)−1]. perm is the recorded
// permutation when fixed (conformance), else drawn from seed (only its
// first min(K, n) entries: memory O(K)). Memory per row: its candidates'
// count.
type clipCovSelection struct {
	k              ClipCov // Low, High, Seq, LB, UB set; the rest made by the passes
	ratio          float64
	seed           uint64
	fixed          bool
	perm           []int
	sumA, sumLP, n float64 // pass 0: masked sums and Σ m
	cands          int     // pass 1: candidates
	decided        bool
}

func (s *clipCovSelection) observe(pass int, b *tokens.Batch) error {
	lp, old, adv, m := covInputs(b)
	rows := b.Rows.N()
	if pass == 0 {
		sums := make([][3]float64, rows)
		overRows(b, func(r, lo, hi int) {
			var sumA, sumLP, n float64
			for t := lo; t < hi; t++ {
				if mt := m[t]; mt != 0 {
					sumA += adv[t] * mt
					sumLP += lp[t] * mt
				}
				n += m[t]
			}
			sums[r] = [3]float64{sumA, sumLP, n}
		})
		for _, x := range sums {
			s.sumA += x[0]
			s.sumLP += x[1]
			s.n += x[2]
		}
		return nil
	}
	k := &s.k
	if k.Base == nil {
		den := s.n + agg.Eps
		k.MeanA, k.MeanLP, k.First = s.sumA/den, s.sumLP/den, b.First()
	}
	lo, hi := 1-k.Low, 1+k.High
	count := make([]int, rows)
	overRows(b, func(r, from, to int) {
		c := 0
		for t := from; t < to; t++ {
			x, a := lp[t], adv[t]
			if !(m[t] > 0) || !k.inWindow(x, a) {
				continue
			}
			ratio := exp(x - old[t]) // the kernel's, so both agree on PPO-active
			if cr, _ := torch.Clamp(ratio, lo, hi); -a*cr > -a*ratio {
				continue
			}
			c++
		}
		count[r] = c
	})
	for _, c := range count {
		k.Base = append(k.Base, s.cands)
		s.cands += c
	}
	return nil
}

// kernel picks the clipped candidates' numbers (after pass 1).
func (s *clipCovSelection) kernel() (Kernel, error) {
	if s.decided {
		return &s.k, nil
	}
	k := min(max(int(s.ratio*s.n), 1), s.cands)
	chosen, err := s.choose(k)
	if err != nil {
		return nil, err
	}
	s.k.Chosen, s.decided = chosen, true
	return &s.k, nil
}

// choose returns k of the candidates' numbers, ascending.
func (s *clipCovSelection) choose(k int) ([]int, error) {
	if s.fixed {
		if len(s.perm) != s.cands {
			return nil, schema.BadInputf("clip_cov: the recorded permutation has %d entries, the batch has %d candidates", len(s.perm), s.cands)
		}
		seen := make([]bool, s.cands)
		for i, x := range s.perm {
			if x < 0 || x >= s.cands || seen[x] {
				return nil, schema.BadInputf("clip_cov: the recorded permutation's entry %d (%d) is not a permutation of 0..%d", i, x, s.cands-1)
			}
			seen[x] = true
		}
		return slices.Sorted(slices.Values(s.perm[:k])), nil
	}
	chosen := make([]int, k)
	if k == s.cands { // every candidate, whatever the permutation
		for i := range chosen {
			chosen[i] = i
		}
		return chosen, nil
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
	for i := range chosen {
		j := i + rng.IntN(s.cands-i)
		vi, vj := at(i), at(j)
		moved[i], moved[j] = vj, vi
		chosen[i] = vj
	}
	slices.Sort(chosen)
	return chosen, nil
}

// klCovSelection chooses kl_cov's penalised tokens: of the n valid tokens
// (m > 0), the k = max(1, int(n·ratio)) with the largest
// cov = (A − mean A)·(lp − mean lp), plain means over them; ties (and NaN,
// ranked highest as torch.topk does) go to the earlier token. k > n is
// torch.topk's error. Memory O(k) per worker (a heap of the k best of its
// runs of rows, merged into the batch's) and O(1) per row.
type klCovSelection struct {
	k           KLCov // Coef, Seq set; the rest made by the passes
	ratio       float64
	sumA, sumLP float64 // pass 0
	n           int
	off         int     // pass 0: tokens of the windows before
	top         covHeap // pass 1
	want        int     // k
	decided     bool
}

func (s *klCovSelection) observe(pass int, b *tokens.Batch) error {
	lp, _, adv, m := covInputs(b)
	if pass == 0 {
		type rowSums struct {
			sumA, sumLP float64
			n           int
		}
		sums := make([]rowSums, b.Rows.N())
		overRows(b, func(r, lo, hi int) {
			var x rowSums
			for t := lo; t < hi; t++ {
				if m[t] > 0 {
					x.sumA += adv[t]
					x.sumLP += lp[t]
					x.n++
				}
			}
			sums[r] = x
		})
		if s.k.Start == nil {
			s.k.First = b.First()
		}
		for r, x := range sums {
			s.sumA += x.sumA
			s.sumLP += x.sumLP
			s.n += x.n
			s.k.Start = append(s.k.Start, s.off+b.Rows.Off[r])
		}
		s.off += b.Rows.Tokens()
		return nil
	}
	if s.want == 0 && s.n > 0 {
		if s.want = max(1, int(float64(s.n)*s.ratio)); s.want > s.n {
			return schema.BadInputf("kl_cov: selected index k out of range (k = %d of %d valid tokens: kl_cov_ratio > 1)", s.want, s.n)
		}
	}
	if s.n == 0 {
		return nil
	}
	meanA, meanLP := s.sumA/float64(s.n), s.sumLP/float64(s.n)
	start := s.k.Start[b.First()-s.k.First:]
	runs := b.Rows.Chunks(parallel.SpanSize)
	var mu sync.Mutex
	var tops []*covHeap // each worker's k best
	parallel.WithScratch(len(runs)-1, func() *covHeap {
		h := make(covHeap, 0, min(s.want, parallel.SpanSize))
		mu.Lock()
		tops = append(tops, &h)
		mu.Unlock()
		return &h
	}, func(top *covHeap, c int) {
		for r := runs[c]; r < runs[c+1]; r++ {
			lo, hi := b.Rows.Span(r)
			for t := lo; t < hi; t++ {
				if m[t] > 0 {
					top.offer(covToken{cov: (adv[t] - meanA) * (lp[t] - meanLP), at: start[r] + t - lo}, s.want)
				}
			}
		}
	})
	for _, top := range tops {
		for _, c := range *top {
			s.top.offer(c, s.want)
		}
	}
	return nil
}

// kernel returns KLCov with the chosen tokens (after pass 1).
func (s *klCovSelection) kernel() (Kernel, error) {
	if !s.decided {
		s.k.Chosen = make([]int, len(s.top))
		for i, c := range s.top {
			s.k.Chosen[i] = c.at
		}
		slices.Sort(s.k.Chosen)
		s.decided = true
	}
	return &s.k, nil
}

// covToken is a valid token's covariance and batch index.
type covToken struct {
	cov float64
	at  int
}

// covHeap is a min-heap of the best tokens: its root is the one a better
// token replaces.
type covHeap []covToken

// offer adds c to the heap, or puts it in the place of the root where the
// heap holds k tokens and c is better.
func (h *covHeap) offer(c covToken, k int) {
	t := *h
	if len(t) < k {
		t = append(t, c)
		for i := len(t) - 1; i > 0; {
			p := (i - 1) / 2
			if !covLess(t[i], t[p]) {
				break
			}
			t[i], t[p] = t[p], t[i]
			i = p
		}
		*h = t
		return
	}
	if !covLess(t[0], c) {
		return
	}
	t[0] = c
	for i := 0; ; {
		j := 2*i + 1
		if j >= len(t) {
			break
		}
		if r := j + 1; r < len(t) && covLess(t[r], t[j]) {
			j = r
		}
		if !covLess(t[j], t[i]) {
			break
		}
		t[i], t[j] = t[j], t[i]
		i = j
	}
}

// covLess orders by cov, NaN highest, then the later token first: a strict
// total order, so the k best of a batch are the k best of the k best of
// any of its parts.
func covLess(x, y covToken) bool {
	switch {
	case x.cov < y.cov:
		return true
	case x.cov > y.cov:
		return false
	case x.cov == y.cov:
		return x.at > y.at
	}
	xNaN, yNaN := x.cov != x.cov, y.cov != y.cov
	if xNaN && yNaN {
		return x.at > y.at
	}
	return yNaN
}

// covPlanner plans clip_cov or kl_cov: the selection over the batch, then
// the kernel with its choice. proto is the kernel before any choice, for
// Sums and Summary.
type covPlanner struct {
	name   string
	newSel func() covSelection
	proto  Kernel
	mode   agg.Mode
	global *agg.Global
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
	k, err := s.kernel()
	if err != nil {
		return nil, err
	}
	return single{k: k, mode: p.mode, global: p.global}.plan(b)
}

// covStream is clip_cov's or kl_cov's Stream: the selection's two passes,
// then the kernel with its choice.
type covStream struct {
	p   covPlanner
	sel covSelection
	k   Kernel // made at the first window
}

func (s *covStream) passes() int { return 2 }

func (s *covStream) observe(pass int, b *tokens.Batch) error {
	if err := b.Require(tokens.LogProb, tokens.OldLogProb, tokens.ActionMask, tokens.Advantages); err != nil {
		return err
	}
	return s.sel.observe(pass, b)
}

func (s *covStream) window(*tokens.Batch) error {
	if s.k != nil {
		return nil
	}
	k, err := s.sel.kernel()
	s.k = k
	return err
}

func (s *covStream) plan() (*Plan, error) {
	return single{k: covWindow{s}, mode: s.p.mode, global: s.p.global}.plan(nil)
}

// covWindow is the kernel of a covStream: the selection's, once made.
type covWindow struct{ s *covStream }

// Sums implements tokens.Kernel.
func (w covWindow) Sums() int { return w.s.p.proto.Sums() }

// Row implements tokens.Kernel.
func (w covWindow) Row(r *tokens.Row, sums []float64) { w.s.k.Row(r, sums) }

// Summary implements Kernel.
func (w covWindow) Summary(mode agg.Mode, r tokens.TermResult) (float64, agg.Metrics) {
	return w.s.p.proto.Summary(mode, r)
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
			actorParam("clip_cov_ratio", 0.0002, schema.Positive, "share of the valid tokens clipped: K = max(int(ratio·N), 1)"),
			actorParam("clip_cov_lb", 1.0, schema.Finite, "candidates have covariance > clip_cov_lb"),
			actorParam("clip_cov_ub", 5.0, schema.Finite, "candidates have covariance < clip_cov_ub"),
			args.Param{Name: "seed", Kind: args.Int, Ctor: int64(0), Range: schema.NonNeg,
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
			proto := ClipCov{Low: low, High: high, Seq: md != agg.TokenMean, LB: lb, UB: ub}
			return covPlanner{
				name:   "clip_cov",
				newSel: func() covSelection { return &clipCovSelection{k: proto, ratio: ratio, seed: seed} },
				proto:  &proto, mode: md, global: verlGlobal(v),
			}, nil
		},
	}
}

// klCovDef is verl's kl_cov (compute_policy_loss_kl_cov).
func klCovDef() *Def {
	return &Def{
		Name: "kl_cov",
		Params: covParams(
			actorParam("kl_cov_ratio", 0.0002, schema.Positive, "share of the valid tokens penalised: k = max(1, int(n·ratio)), the largest covariances"),
			actorParam("ppo_kl_coef", 0.1, schema.Finite, "coefficient κ of the penalty κ·|lp − old| on the chosen tokens"),
		),
		Inputs:   []string{tokens.OldLogProb, tokens.ActionMask, tokens.Advantages},
		Weighted: true,
		CPUOnly:  true,
		build: func(v args.Values) (planner, error) {
			md := mode(v, "loss_agg_mode")
			ratio := v.Float("kl_cov_ratio")
			proto := KLCov{Coef: v.Float("ppo_kl_coef"), Seq: md != agg.TokenMean}
			return covPlanner{
				name:   "kl_cov",
				newSel: func() covSelection { return &klCovSelection{k: proto, ratio: ratio} },
				proto:  &proto, mode: md, global: verlGlobal(v),
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
