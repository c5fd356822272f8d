package lower

import (
	"testing"
	"unsafe"

	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/entropy"
	"github.com/rftpipe/rftpipe/stages/kl"
	"github.com/rftpipe/rftpipe/stages/loss"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// TestKernelLayout pins the 80-byte layout of rft_kernel (the cgo test of
// gpu/kernels checks it against the C compiler).
func TestKernelLayout(t *testing.T) {
	var k Kernel
	if unsafe.Sizeof(k) != 80 || unsafe.Offsetof(k.Flag) != 4 || unsafe.Offsetof(k.P) != 16 {
		t.Fatalf("Kernel size %d, flag at %d, p at %d; want 80, 4, 16", unsafe.Sizeof(k), unsafe.Offsetof(k.Flag), unsafe.Offsetof(k.P))
	}
}

// recorder is an Evaluator that lowers every evaluation and records the
// kinds, then delegates to the CPU (so Finish and GradTerms run).
type recorder struct {
	t     *testing.T
	kinds map[int32]bool
}

func (r *recorder) Eval(b *tokens.Batch, grad []float64, terms ...tokens.Term) ([]tokens.TermResult, error) {
	p, err := Lower(b, terms)
	if err != nil {
		r.t.Fatalf("lower: %v", err)
	}
	covered := len(p.Zero)
	for i, t := range p.Terms {
		r.kinds[t.Kernel.Kind] = true
		covered += len(t.Rows)
		if t.Sums != terms[i].Kernel.Sums() || t.Sums > MaxRed {
			r.t.Fatalf("%T: %d sums lowered, kernel has %d", terms[i].Kernel, t.Sums, terms[i].Kernel.Sums())
		}
	}
	if covered != b.Rows.N() {
		r.t.Fatalf("%d rows covered, batch has %d", covered, b.Rows.N())
	}
	return tokens.CPU.Eval(b, grad, terms...)
}

// TestEveryKernelLowers evaluates every registered loss (default
// arguments), KL function and entropy function through Lower: every CPU
// kernel they use has a device form, and every device kind is reached.
func TestEveryKernelLowers(t *testing.T) {
	rec := &recorder{t: t, kinds: map[int32]bool{}}
	b := tokens.Synthetic(16, 40, 3)
	grad := make([]float64, b.Rows.Tokens())
	for _, name := range loss.Default().Names() {
		if s, _ := loss.Default().Get(name); s.New.CPUOnly {
			continue // no device form (dro's default arguments do not even build)
		}
		l, err := loss.New(loss.Default(), name, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.EvalOn(rec, b, grad); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	for _, name := range kl.Registry().Names() {
		f, err := kl.New(name, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := f.LossOn(rec, b, agg.TokenMean, grad); err != nil {
			t.Fatalf("kl %s: %v", name, err)
		}
	}
	for _, name := range entropy.Registry().Names() {
		f, err := entropy.New(name, args.Values{"entropy_coef": 0.1})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := f.LossOn(rec, b, agg.TokenMean, grad); err != nil {
			t.Fatalf("entropy %s: %v", name, err)
		}
	}
	for k := int32(0); k < NumKinds; k++ {
		if !rec.kinds[k] {
			t.Errorf("kernel kind %d never lowered", k)
		}
	}
}

// unknown is a kernel without a device form.
type unknown struct{}

func (unknown) Sums() int                  { return 0 }
func (unknown) Row(*tokens.Row, []float64) {}

func TestUnknownKernel(t *testing.T) {
	if _, err := Describe(unknown{}, false); err == nil {
		t.Fatal("a kernel without a device form lowered")
	}
}
