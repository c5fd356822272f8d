package entropy

import (
	"errors"
	"math"
	"testing"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

func TestLoss(t *testing.T) {
	b, err := tokens.FromMatrix(tokens.Entropy, [][]float64{{1, 2, 3}, {0.5, 0.5, 9}})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.SetMatrix(tokens.ActionMask, [][]float64{{1, 1, 0}, {1, 0, 0}}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		coef   float64
		expert []bool
		mode   agg.Mode
		loss   float64
		grad   []float64
	}{
		{"default", 0.1, nil, agg.TokenMean, 0.1 * 3.5 / 3, []float64{0.1 / 3, 0.1 / 3, 0, 0.1 / 3, 0, 0}},
		{"default", 0.1, nil, agg.SeqMeanTokenSum, 0.1 * 3.5 / 2, []float64{0.05, 0.05, 0, 0.05, 0, 0}},
		// upstream: entropy_loss · entropy_coef, any coefficient (a negative
		// one penalises entropy)
		{"default", -0.1, nil, agg.TokenMean, -0.1 * 3.5 / 3, []float64{-0.1 / 3, -0.1 / 3, 0, -0.1 / 3, 0, 0}},
		{"mix", 0.1, []bool{true, false}, agg.TokenMean, 0.1 * 0.5, []float64{0, 0, 0, 0.1, 0, 0}},
		{"mix", 0.1, []bool{true, true}, agg.SeqMeanTokenMean, math.NaN(), []float64{0, 0, 0, 0, 0, 0}},
		{"none", 0.1, nil, agg.TokenMean, 0, []float64{0, 0, 0, 0, 0, 0}},
	}
	for _, tc := range tests {
		if tc.expert != nil {
			if err := b.SetExpertMask(tc.expert); err != nil {
				t.Fatal(err)
			}
		}
		f, err := New(tc.name, args.Values{"entropy_coef": tc.coef})
		if err != nil {
			t.Fatal(err)
		}
		grad := make([]float64, 6)
		loss, m, err := f.Loss(b, tc.mode, grad)
		if err != nil {
			t.Fatal(err)
		}
		if !(math.Abs(loss-tc.loss) < 1e-9 || math.IsNaN(loss) && math.IsNaN(tc.loss)) {
			t.Errorf("%s %v: loss %v, want %v", tc.name, tc.mode, loss, tc.loss)
		}
		if tc.name != "none" && !(math.Abs(m["entropy_loss"]*tc.coef-loss) < 1e-12 || math.IsNaN(loss)) {
			t.Errorf("%s: entropy_loss %v is not the unscaled aggregate", tc.name, m["entropy_loss"])
		}
		for i := range grad {
			if math.Abs(grad[i]-tc.grad[i]) > 1e-9 {
				t.Errorf("%s %v: grad %v, want %v", tc.name, tc.mode, grad, tc.grad)
				break
			}
		}
	}
}

func TestErrors(t *testing.T) {
	if _, err := New("max", nil); !errors.Is(err, schema.ErrBadInput) {
		t.Errorf("unknown name: %v", err)
	}
	// entropy_coef has no constructor default: a user dict must give it.
	if _, err := New("default", args.Values{}); !errors.Is(err, schema.ErrBadInput) {
		t.Errorf("missing entropy_coef: %v", err)
	}
	b, _ := tokens.FromMatrix(tokens.Entropy, [][]float64{{1}})
	f, _ := New("mix", nil)
	if _, _, err := f.Loss(b, agg.TokenMean, make([]float64, 1)); err == nil || err.Error() != "expert_mask is required for MixEntropyLossFn" {
		t.Errorf("mix without expert_mask: %v", err)
	}
}
