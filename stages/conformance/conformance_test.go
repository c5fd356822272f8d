package conformance

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
)

// TestReference: with a Reference registry, a case that fails is
// ill-conditioned when the reference fails it too, failed when the
// reference passes it; passing cases never consult the reference.
func TestReference(t *testing.T) {
	answer := func(got map[string]float64) Runner {
		return func(c *Case, chk *Checker) error {
			var want struct{ Loss float64 }
			if err := json.Unmarshal(c.Expected, &want); err != nil {
				return err
			}
			chk.Scalar("loss", got[c.Name], want.Loss)
			return nil
		}
	}
	cases := []Case{
		{Name: "ok", Expected: json.RawMessage(`{"loss": 1}`)},
		{Name: "ill", Expected: json.RawMessage(`{"loss": 1}`)},
		{Name: "wrong", Expected: json.RawMessage(`{"loss": 1}`)},
	}
	device := map[string]float64{"ok": 1 + 1e-7, "ill": 1.001, "wrong": 1.001}
	cpu := map[string]float64{"ok": 5, "ill": 1.001, "wrong": 1}
	reg, err := NewRegistry(Kind{Name: "k", New: answer(device)})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := NewRegistry(Kind{Name: "k", New: answer(cpu)})
	if err != nil {
		t.Fatal(err)
	}
	reg.Tol = &Tolerance{Rtol: 1e-5, Atol: 1e-6}
	reg.Reference = ref
	var rep Report
	RunFile(&File{Kind: "k", Cases: cases}, reg, &rep)
	if rep.Passed != 1 || rep.Failed != 1 || rep.IllConditioned != 1 ||
		len(rep.Mismatches) != 1 || rep.Mismatches[0].Case != "wrong" || len(rep.Ill) != 1 || rep.Ill[0].Case != "ill" {
		t.Fatalf("report %+v", rep)
	}
	// Without a reference both fail.
	reg.Reference = nil
	rep = Report{}
	RunFile(&File{Kind: "k", Cases: cases}, reg, &rep)
	if rep.Passed != 1 || rep.Failed != 2 || rep.IllConditioned != 0 {
		t.Fatalf("no reference: report %+v", rep)
	}
}

// TestJSONChecks: MatrixJSON, MetricsJSON and LossJSON compare against golden JSON
// (non-finite values as strings), record a mismatch where a value differs,
// and return an error naming the field where the JSON does not decode.
func TestJSONChecks(t *testing.T) {
	for _, tc := range []struct {
		name     string
		check    func(k *Checker) error
		mismatch string // the field of the one mismatch, "" for none
		err      string
	}{
		{"matrix equal", func(k *Checker) error {
			return k.MatrixJSON("g", [][]float64{{1, 2}, {3}}, json.RawMessage(`[[1,2],[3]]`))
		}, "", ""},
		{"matrix differs", func(k *Checker) error {
			return k.MatrixJSON("g", [][]float64{{1, 2}, {4}}, json.RawMessage(`[[1,2],[3]]`))
		}, "g[1][0]", ""},
		{"matrix bad json", func(k *Checker) error {
			return k.MatrixJSON("g", nil, json.RawMessage(`{"a":1}`))
		}, "", "expected g: "},
		{"metrics equal", func(k *Checker) error {
			return k.MetricsJSON("metrics", map[string]float64{"a": 1, "b": math.Inf(1)}, json.RawMessage(`{"a":1,"b":"inf"}`))
		}, "", ""},
		{"metrics missing", func(k *Checker) error {
			return k.MetricsJSON("metrics", map[string]float64{}, json.RawMessage(`{"a":1}`))
		}, "metrics.a", ""},
		{"metrics bad json", func(k *Checker) error {
			return k.MetricsJSON("metrics", nil, json.RawMessage(`[1]`))
		}, "", "expected metrics: "},
		{"loss equal", func(k *Checker) error {
			return k.LossJSON(json.RawMessage(`{"loss":0.5,"metrics":{"m":1},"g":[[1],[2]]}`), "g", false, 0.5, map[string]float64{"m": 1}, [][]float64{{1}, {2}})
		}, "", ""},
		{"loss differs", func(k *Checker) error {
			return k.LossJSON(json.RawMessage(`{"loss":0.5,"metrics":{"m":1},"g":[[1],[2]]}`), "g", false, 0.25, map[string]float64{"m": 1}, [][]float64{{1}, {2}})
		}, "loss", ""},
		{"loss gradient differs", func(k *Checker) error {
			return k.LossJSON(json.RawMessage(`{"loss":0.5,"metrics":{"m":1},"g":[[1],[2]]}`), "g", false, 0.5, map[string]float64{"m": 1}, [][]float64{{1}, {3}})
		}, "g[1][0]", ""},
		{"loss null gradient, no term", func(k *Checker) error {
			return k.LossJSON(json.RawMessage(`{"loss":0,"metrics":{},"g":null}`), "g", true, 0, map[string]float64{}, [][]float64{{7}})
		}, "", ""},
		{"loss null gradient compared", func(k *Checker) error {
			return k.LossJSON(json.RawMessage(`{"loss":0,"metrics":{},"g":null}`), "g", false, 0, map[string]float64{}, [][]float64{{7}})
		}, "g rows", ""},
		{"loss no metrics", func(k *Checker) error {
			return k.LossJSON(json.RawMessage(`{"loss":0,"g":[[0]]}`), "g", false, 0, nil, [][]float64{{0}})
		}, "", "expected metrics: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := NewChecker(&Case{Name: "c"})
			err := tc.check(k)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.err)):
				t.Fatalf("error %v, want one starting %q", err, tc.err)
			}
			var fields []string
			for _, m := range k.Mismatches {
				fields = append(fields, m.Field)
			}
			var want []string
			if tc.mismatch != "" {
				want = []string{tc.mismatch}
			}
			if !slices.Equal(fields, want) {
				t.Fatalf("mismatches %q, want %q", fields, want)
			}
		})
	}
}

// TestDecodeCall: the call arguments decode into a struct by their json
// tags; an argument of the wrong type is an error.
func TestDecodeCall(t *testing.T) {
	c := &Case{Call: map[string]json.RawMessage{"method": json.RawMessage(`"m"`), "rows": json.RawMessage(`[2,1]`)}}
	var call struct {
		Method string `json:"method"`
		Rows   []int  `json:"rows"`
	}
	if err := c.DecodeCall(&call); err != nil || call.Method != "m" || !slices.Equal(call.Rows, []int{2, 1}) {
		t.Fatalf("DecodeCall: %+v, %v", call, err)
	}
	var bad struct {
		Method int `json:"method"`
	}
	if err := c.DecodeCall(&bad); err == nil {
		t.Fatal("DecodeCall decoded a string into an int")
	}
}
