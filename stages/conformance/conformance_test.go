package conformance

import (
	"encoding/json"
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
	reg, ref := NewRegistry(), NewRegistry()
	if err := reg.Add("k", answer(device)); err != nil {
		t.Fatal(err)
	}
	if err := ref.Add("k", answer(cpu)); err != nil {
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
