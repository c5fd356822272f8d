// Package lower turns an evaluation of tokens.Terms (the CPU kernels of
// stages/loss, stages/kl and stages/entropy) into the form the device
// kernels of gpu/kernels/rft_loss.h take: one Kernel descriptor per term
// (kind, switches, parameters), the rows of each term, and per-row scales
// computed with the batch's own Layout and RowScale, so the CPU and device
// paths share the row assignment and aggregation weights.
//
// It is used by package gpu (CUDA) and by gpu/kernels, which runs the
// same header as C on the CPU; both then execute a Plan with Execute's
// contract and hand the sums back through Plan.Results.
package lower

import (
	"fmt"
	"math"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/entropy"
	"github.com/rftpipe/rftpipe/stages/kl"
	"github.com/rftpipe/rftpipe/stages/loss"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// Kernel kinds (rft_loss.h's RFT_* enum).
const (
	KindPPO int32 = iota
	KindGSPO
	KindCISPO
	KindSAPO
	KindTOPR
	KindSPPO
	KindOPMD
	KindSFT
	KindREC
	KindIS
	KindDPOSums
	KindRowFactor
	KindKL
	KindEntropy
	KindPG
	NumKinds
)

// MaxRed is RFT_MAXRED: the most sums of any kernel, and the stride of the
// device's per-row partial sums.
const MaxRed = 6

// Kernel mirrors rft_kernel (80 bytes; gpu/kernels checks the layout
// against the C compiler's).
type Kernel struct {
	Kind int32
	Flag [3]int32
	P    [8]float64
}

// REC argument values → rft_loss.h enums.
var (
	recClip   = map[string]int32{"none": 0, "one-side": 1, "gspo-one-side": 2, "two-side": 3, "ring": 4}
	recWeight = map[string]int32{"none": 0, "importance_sampling": 1, "gspo_importance_sampling": 2, "advantage": 3,
		"truncated_importance_sampling": 4}
	recReg = map[string]int32{"none": 0, "k2": 1, "forward-kl": 2}
)

func flag(c bool) int32 {
	if c {
		return 1
	}
	return 0
}

// Describe returns the device descriptor of a CPU kernel. Derived bounds
// (1-Low, 1+High, …) are computed here, in float64 exactly as the Go
// kernels compute them. hasOld says whether the batch has old_logprob (the
// KL kernel's corrected_k3 uses it only then). A kernel type without a
// device implementation is an error naming it.
func Describe(k tokens.Kernel, hasOld bool) (Kernel, error) {
	var d Kernel
	switch k := k.(type) {
	case *loss.PPO:
		d = Kernel{Kind: KindPPO, Flag: [3]int32{flag(k.SeqMask), flag(k.Fallback)},
			P: [8]float64{1 - k.Low, 1 + k.High, k.ClipC, k.Delta}}
	case *loss.GSPO:
		if k.Verl {
			return d, errVerl
		}
		d = Kernel{Kind: KindGSPO, P: [8]float64{1 - k.Low, 1 + k.High}}
	case *loss.CISPO:
		if k.Verl {
			return d, errVerl
		}
		d = Kernel{Kind: KindCISPO, Flag: [3]int32{flag(k.MaskClip)},
			P: [8]float64{1 - k.Low, 1 + k.High, 1 - k.MaskLow, 1 + k.MaskHigh}}
	case *loss.SAPO:
		if k.Verl {
			return d, errVerl
		}
		d = Kernel{Kind: KindSAPO, Flag: [3]int32{flag(k.PaperGradient)}, P: [8]float64{k.TauPos, k.TauNeg}}
	case *loss.TOPR:
		d = Kernel{Kind: KindTOPR, Flag: [3]int32{flag(k.SequenceRatio)}, P: [8]float64{k.Threshold}}
	case *loss.SPPO:
		d = Kernel{Kind: KindSPPO, P: [8]float64{1 / (1 + k.Eps), 1 + k.Eps}}
	case *loss.OPMD:
		d = Kernel{Kind: KindOPMD, P: [8]float64{1 / (1 + k.Tau)}}
	case *loss.SFT:
		var lnCut float64
		if k.Cutoff < 1 {
			lnCut = math.Log(k.Cutoff)
		}
		d = Kernel{Kind: KindSFT, Flag: [3]int32{int32(k.Weight), flag(k.Cutoff < 1)}, P: [8]float64{lnCut}}
	case *loss.REC:
		c, ok1 := recClip[k.ClipMode]
		w, ok2 := recWeight[k.Weight]
		r, ok3 := recReg[k.Regularizer]
		if !ok1 || !ok2 || !ok3 {
			return d, schema.BadInputf("rec: no device form of clip_mode %q, weight %q, regularizer %q", k.ClipMode, k.Weight, k.Regularizer)
		}
		d = Kernel{Kind: KindREC, Flag: [3]int32{c, w, r},
			P: [8]float64{1 - k.Low, 1 + k.High, 1 - k.LowPrime, 1 + k.HighPrime, k.Coef, k.Temp, float64(flag(k.FixOPD))}}
	case *loss.IS:
		d = Kernel{Kind: KindIS}
	case *loss.DPOSums:
		d = Kernel{Kind: KindDPOSums}
	case *loss.RowFactor:
		d = Kernel{Kind: KindRowFactor}
	case kl.Kernel:
		d = Kernel{Kind: KindKL, Flag: [3]int32{int32(k.Fn.Kind), flag(k.Fn.DetachRatio), flag(hasOld)}}
	case entropy.Kernel:
		d = Kernel{Kind: KindEntropy}
	case *loss.PG:
		d = Kernel{Kind: KindPG, Flag: [3]int32{flag(k.KL)}}
	default:
		return d, fmt.Errorf("gpu: no device implementation of kernel %T", k)
	}
	return d, nil
}

// errVerl refuses verl's versions of gspo, sapo and cispo (argument verl),
// which have no device form.
var errVerl = schema.BadInputf("gpu: the verl=true versions of gspo, sapo and cispo have no device form (use --device cpu)")

// Term is one term of a Plan.
type Term struct {
	Kernel Kernel
	// Sums is the number of sums (the CPU kernel's Sums()).
	Sums int
	// Rows are the batch rows the term evaluates, ascending.
	Rows []int32
	// RowOut, when set (DPO sums), receives two values per batch row:
	// RowOut[2r], RowOut[2r+1] ← the device's per-row outputs of row r.
	RowOut []float64
}

// Plan is one evaluation lowered for a device.
type Plan struct {
	Terms []Term
	// Zero are the rows no term covers (their gradient is 0).
	Zero []int32
	// Scale and GradScale are Row.Scale and Row.GradScale per batch row
	// (for RowFactor rows GradScale is the row's factor F).
	Scale, GradScale []float64
	// Count is each row's mask count.
	Count []float64
	// Stats are the terms' statistics, as Batch.Eval reports them.
	Stats []tokens.Stats
}

// Lower prepares the evaluation of terms over b.
func Lower(b *tokens.Batch, terms []tokens.Term) (*Plan, error) {
	if b.Has(tokens.RolloutISWeights) {
		return nil, schema.BadInputf("gpu: %s have no device form (use --device cpu)", tokens.RolloutISWeights)
	}
	lay, err := b.Layout(terms)
	if err != nil {
		return nil, err
	}
	B, first := b.Rows.N(), b.First()
	p := &Plan{Terms: make([]Term, len(terms)), Scale: make([]float64, B), GradScale: make([]float64, B),
		Count: make([]float64, B), Stats: lay.Stats}
	hasOld := b.Has(tokens.OldLogProb)
	for i, t := range terms {
		d, err := Describe(t.Kernel, hasOld)
		if err != nil {
			return nil, err
		}
		if n := t.Kernel.Sums(); n > MaxRed {
			return nil, fmt.Errorf("gpu: kernel %T has %d sums, at most %d are supported", t.Kernel, n, MaxRed)
		}
		p.Terms[i] = Term{Kernel: d, Sums: t.Kernel.Sums()}
		if s, ok := t.Kernel.(*loss.DPOSums); ok {
			if len(s.Out) < 2*(first+B) {
				return nil, fmt.Errorf("gpu: dpo sums buffer has %d values, want %d", len(s.Out), 2*(first+B))
			}
			p.Terms[i].RowOut = s.Out[2*first : 2*(first+B)] // a window's rows
		}
	}
	for r := 0; r < B; r++ {
		p.Count[r] = b.RowCount(r)
		ti := lay.Term[r]
		if ti < 0 {
			p.Zero = append(p.Zero, int32(r))
			continue
		}
		t := terms[ti]
		p.Terms[ti].Rows = append(p.Terms[ti].Rows, int32(r))
		p.Scale[r], p.GradScale[r] = b.RowScale(t, lay.Stats[ti], r)
		if f, ok := t.Kernel.(*loss.RowFactor); ok {
			if len(f.F) < first+B {
				return nil, fmt.Errorf("gpu: row factors have %d values, the batch has %d rows", len(f.F), first+B)
			}
			p.GradScale[r] = f.F[first+r]
		}
	}
	return p, nil
}

// Results packages the terms' sums (sums[i] holds Terms[i].Sums values) as
// Batch.Eval returns them.
func (p *Plan) Results(sums [][]float64) []tokens.TermResult {
	out := make([]tokens.TermResult, len(p.Terms))
	for i := range p.Terms {
		out[i] = tokens.TermResult{Sums: sums[i][:p.Terms[i].Sums], Stats: p.Stats[i]}
	}
	return out
}
