package objective

import (
	"math"
	"reflect"
	"runtime"
	"testing"

	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/entropy"
	"github.com/rftpipe/rftpipe/stages/kl"
	"github.com/rftpipe/rftpipe/stages/loss"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// TestWindowsEqualWhole evaluates objectives over a batch in one piece and
// in windows of rows: the loss, every metric and every gradient agree.
func TestWindowsEqualWhole(t *testing.T) {
	cases := []struct {
		fn    string
		args  args.Values
		mode  string
		kl    string
		ent   float64
		steps int
	}{
		{fn: "ppo", mode: "token-mean", kl: "k3", ent: 0.01},
		{fn: "ppo", mode: "seq-mean-token-sum-norm", kl: "low_var_kl"},
		{fn: "gspo", mode: "seq-mean-token-mean"},
		{fn: "dpo", mode: "token-mean", kl: "k1"},
		{fn: "mix", mode: "token-mean", ent: 0.001},
		{fn: "sapo", mode: "seq-mean-token-sum"},
		{fn: "sft", mode: "token-mean"},
	}
	for _, c := range cases {
		t.Run(c.fn+"/"+c.mode, func(t *testing.T) {
			spec, err := loss.Default().Get(c.fn)
			if err != nil {
				t.Fatal(err)
			}
			pl, err := spec.New.FromConfig(c.args, c.mode)
			if err != nil {
				t.Fatal(err)
			}
			klName := c.kl
			if klName == "" {
				klName = "none"
			}
			klFn, err := kl.New(klName, args.Values{"kl_coef": 0.01})
			if err != nil {
				t.Fatal(err)
			}
			entFn, err := entropy.New("default", args.Values{"entropy_coef": c.ent})
			if err != nil {
				t.Fatal(err)
			}
			mode, _ := agg.ParseMode(c.mode)
			o := &Objective{Policy: pl, KL: klFn, Entropy: entFn, Mode: mode}
			b := tokens.Synthetic(38, 20, 5)

			wantGrad := make([]float64, b.Rows.Tokens())
			want, err := o.Eval(tokens.CPU, b, wantGrad)
			if err != nil {
				t.Fatal(err)
			}
			tot := tokens.TotalsOf(b)
			windows := [][2]int{{0, 7}, {7, 8}, {8, 30}, {30, 38}}
			var e *Eval
			grad := make([]float64, b.Rows.Tokens())
			for _, w := range windows {
				s := b.Slice(w[0], w[1])
				if err := s.SetWindow(w[0], tot); err != nil {
					t.Fatal(err)
				}
				if e == nil {
					if e, err = o.Start(tokens.CPU, s); err != nil {
						t.Fatal(err)
					}
				}
				lo, hi := b.Rows.Off[w[0]], b.Rows.Off[w[1]]
				if err := e.Window(s, grad[lo:hi]); err != nil {
					t.Fatal(err)
				}
			}
			got, err := e.Finish()
			if err != nil {
				t.Fatal(err)
			}
			if e.NeedsGradPass() {
				for _, w := range windows {
					s := b.Slice(w[0], w[1])
					_ = s.SetWindow(w[0], tot)
					lo, hi := b.Rows.Off[w[0]], b.Rows.Off[w[1]]
					if err := e.GradWindow(s, grad[lo:hi]); err != nil {
						t.Fatal(err)
					}
				}
			}
			close := func(a, b float64) bool { return a == b || math.Abs(a-b) <= 1e-12*math.Max(math.Abs(a), math.Abs(b)) }
			if !close(got.Loss, want.Loss) {
				t.Errorf("loss %v, whole batch %v", got.Loss, want.Loss)
			}
			if len(got.Metrics) != len(want.Metrics) {
				t.Errorf("metrics %v, whole batch %v", got.Metrics, want.Metrics)
			}
			for k, v := range want.Metrics {
				if !close(got.Metrics[k], v) && !(math.IsNaN(v) && math.IsNaN(got.Metrics[k])) {
					t.Errorf("%s = %v, whole batch %v", k, got.Metrics[k], v)
				}
			}
			for i := range grad {
				if !close(grad[i], wantGrad[i]) {
					t.Fatalf("grad[%d] = %v, whole batch %v", i, grad[i], wantGrad[i])
				}
			}
		})
	}
}

// TestSameBitsWhateverTheCores: an objective with KL and entropy terms over
// a batch of several spans (each term's rows, the KL gradient's add) gives
// the same loss, metrics and gradient bits at GOMAXPROCS 1 and 8.
func TestSameBitsWhateverTheCores(t *testing.T) {
	b := tokens.Synthetic(300, 517, 7) // 155,100 tokens: three spans
	o, err := New(Config{PolicyLoss: "ppo", KLLoss: "low_var_kl", KLCoef: 0.01, Entropy: "default", EntropyCoef: 0.001})
	if err != nil {
		t.Fatal(err)
	}
	var res [2]Result
	var grads [2][]float64
	for i, procs := range []int{1, 8} {
		prev := runtime.GOMAXPROCS(procs)
		grads[i] = make([]float64, b.Rows.Tokens())
		res[i], err = o.Eval(tokens.CPU, b, grads[i])
		runtime.GOMAXPROCS(prev)
		if err != nil {
			t.Fatal(err)
		}
	}
	if math.Float64bits(res[0].Loss) != math.Float64bits(res[1].Loss) || !reflect.DeepEqual(res[0].Metrics, res[1].Metrics) {
		t.Errorf("loss %v %v, metrics %v %v", res[0].Loss, res[1].Loss, res[0].Metrics, res[1].Metrics)
	}
	for i := range grads[0] {
		if math.Float64bits(grads[0][i]) != math.Float64bits(grads[1][i]) {
			t.Fatalf("token %d: gradient %v at GOMAXPROCS 1, %v at 8", i, grads[0][i], grads[1][i])
		}
	}
}
