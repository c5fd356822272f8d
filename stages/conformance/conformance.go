// Package conformance runs the golden vectors of fixtures/conformance (computed
// with the reference implementation) against rftpipe's stages.
//
// The package knows the file format and how to compare numbers; it knows no
// algorithm. Each stage package supplies a Runner for the kinds it implements
// and the caller assembles them in a Registry (rftpipe's one table is
// pipeline/golden.Kinds):
//
//	reg, err := conformance.NewRegistry(conformance.Kind{Name: "policy_loss",
//		New: loss.ConformanceRunnerOn(loss.Default(), tokens.CPU)})
//	rep, err := conformance.RunDir("fixtures/conformance", []string{"policy_loss"}, reg)
package conformance

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/registry"
)

// File is one golden file, e.g. policy_loss.json.
type File struct {
	FormatVersion int    `json:"format_version"`
	Kind          string `json:"kind"`
	Cases         []Case `json:"cases"`
}

// Case is one golden case. Inputs, args and expected outputs are kept raw:
// each Runner decodes what its kind needs.
type Case struct {
	Name            string                     `json:"name"`
	Fn              string                     `json:"fn"`
	Args            map[string]json.RawMessage `json:"args"`
	Call            map[string]json.RawMessage `json:"call"`
	Inputs          map[string]json.RawMessage `json:"inputs"`
	Random          bool                       `json:"random"`
	Float32Internal bool                       `json:"float32_internal"`
	Expected        json.RawMessage            `json:"expected"`
	Tolerance       Tolerance                  `json:"tolerance"`
	// ToleranceMaskMetrics is the tolerance of m2po's mask statistics.
	ToleranceMaskMetrics *Tolerance `json:"tolerance_mask_metrics"`
	Notes                string     `json:"notes"`
}

// ExpectedError reports whether the reference raised for this case, and its message.
func (c *Case) ExpectedError() (bool, string) {
	var e struct {
		Error *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(c.Expected, &e); err != nil || e.Error == nil {
		return false, ""
	}
	return true, e.Error.Type + ": " + e.Error.Message
}

// DecodeCall decodes the case's call arguments into v (a struct whose
// fields name them in json tags).
func (c *Case) DecodeCall(v any) error {
	b, err := json.Marshal(c.Call)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// Tolerance is the combined rule |got-want| <= Atol + Rtol*|want|.
type Tolerance struct {
	Rtol float64 `json:"rtol"`
	Atol float64 `json:"atol"`
}

// Close reports whether got matches want. Non-finite values must match exactly
// (NaN matches NaN).
func (t Tolerance) Close(got, want float64) bool {
	switch {
	case math.IsNaN(want):
		return math.IsNaN(got)
	case math.IsInf(want, 0):
		return got == want
	case math.IsNaN(got) || math.IsInf(got, 0):
		return false
	}
	return math.Abs(got-want) <= t.Atol+t.Rtol*math.Abs(want)
}

// Float is a float64 that also decodes the strings "nan", "inf" and "-inf"
// used by the golden files for non-finite values.
type Float float64

// UnmarshalJSON implements json.Unmarshaler.
func (f *Float) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		switch strings.ToLower(s) {
		case "nan":
			*f = Float(math.NaN())
		case "inf", "+inf", "infinity":
			*f = Float(math.Inf(1))
		case "-inf", "-infinity":
			*f = Float(math.Inf(-1))
		default:
			return fmt.Errorf("conformance: %q is not a number", s)
		}
		return nil
	}
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*f = Float(v)
	return nil
}

// Floats decodes a JSON array of numbers (non-finite ones as strings).
func Floats(raw json.RawMessage) ([]float64, error) {
	var fs []Float
	if err := json.Unmarshal(raw, &fs); err != nil {
		return nil, err
	}
	out := make([]float64, len(fs))
	for i, f := range fs {
		out[i] = float64(f)
	}
	return out, nil
}

// Matrix decodes a JSON array of arrays of numbers (rows may differ in length).
func Matrix(raw json.RawMessage) ([][]float64, error) {
	var rows []json.RawMessage
	if err := json.Unmarshal(raw, &rows); err != nil {
		return nil, err
	}
	out := make([][]float64, len(rows))
	for i, r := range rows {
		v, err := Floats(r)
		if err != nil {
			return nil, fmt.Errorf("row %d: %w", i, err)
		}
		out[i] = v
	}
	return out, nil
}

// Metrics decodes a JSON object of metric name → number.
func Metrics(raw json.RawMessage) (map[string]float64, error) {
	var m map[string]Float
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	out := make(map[string]float64, len(m))
	for k, v := range m {
		out[k] = float64(v)
	}
	return out, nil
}

// Mismatch is one value that differs from the golden file.
type Mismatch struct {
	Case  string
	Field string
	Got   string
	Want  string
}

func (m Mismatch) String() string {
	return fmt.Sprintf("%s: %s: got %s, want %s", m.Case, m.Field, m.Got, m.Want)
}

// Checker collects mismatches of one case.
type Checker struct {
	Case       *Case
	Tol        Tolerance
	Mismatches []Mismatch
}

// NewChecker returns a Checker using the case's tolerance.
func NewChecker(c *Case) *Checker {
	return &Checker{Case: c, Tol: c.Tolerance}
}

// Failf records a mismatch with free-form got/want texts.
func (k *Checker) Failf(field, got, want string) {
	k.Mismatches = append(k.Mismatches, Mismatch{Case: k.Case.Name, Field: field, Got: got, Want: want})
}

func fmtFloat(v float64) string { return fmt.Sprintf("%.17g", v) }

// Scalar compares one number.
func (k *Checker) Scalar(field string, got, want float64) {
	if !k.Tol.Close(got, want) {
		k.Failf(field, fmtFloat(got), fmtFloat(want))
	}
}

// Int compares an exact count.
func (k *Checker) Int(field string, got, want int) {
	if got != want {
		k.Failf(field, fmt.Sprint(got), fmt.Sprint(want))
	}
}

// Vector compares two vectors element by element; only the first differing
// element is reported.
func (k *Checker) Vector(field string, got, want []float64) {
	if len(got) != len(want) {
		k.Failf(field+" length", fmt.Sprint(len(got)), fmt.Sprint(len(want)))
		return
	}
	for i := range want {
		if !k.Tol.Close(got[i], want[i]) {
			k.Failf(fmt.Sprintf("%s[%d]", field, i), fmtFloat(got[i]), fmtFloat(want[i]))
			return
		}
	}
}

// Matrix compares two ragged matrices row by row.
func (k *Checker) Matrix(field string, got, want [][]float64) {
	if len(got) != len(want) {
		k.Failf(field+" rows", fmt.Sprint(len(got)), fmt.Sprint(len(want)))
		return
	}
	for i := range want {
		before := len(k.Mismatches)
		k.Vector(fmt.Sprintf("%s[%d]", field, i), got[i], want[i])
		if len(k.Mismatches) > before {
			return
		}
	}
}

// Metrics compares metric maps: the same names, each value within tolerance.
func (k *Checker) Metrics(field string, got, want map[string]float64) {
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		g, ok := got[n]
		if !ok {
			k.Failf(field+"."+n, "missing", fmtFloat(want[n]))
			continue
		}
		k.Scalar(field+"."+n, g, want[n])
	}
	extra := make([]string, 0)
	for n := range got {
		if _, ok := want[n]; !ok {
			extra = append(extra, n)
		}
	}
	sort.Strings(extra)
	for _, n := range extra {
		k.Failf(field+"."+n, fmtFloat(got[n]), "absent")
	}
}

// MatrixJSON compares got with the golden matrix raw (decoded by Matrix);
// the error is raw's, when it does not decode.
func (k *Checker) MatrixJSON(field string, got [][]float64, raw json.RawMessage) error {
	want, err := Matrix(raw)
	if err != nil {
		return fmt.Errorf("expected %s: %w", field, err)
	}
	k.Matrix(field, got, want)
	return nil
}

// MetricsJSON compares got with the golden metrics raw (decoded by
// Metrics); the error is raw's, when it does not decode.
func (k *Checker) MetricsJSON(field string, got map[string]float64, raw json.RawMessage) error {
	want, err := Metrics(raw)
	if err != nil {
		return fmt.Errorf("expected %s: %w", field, err)
	}
	k.Metrics(field, got, want)
	return nil
}

// LossJSON compares a loss function's loss, metrics and per-token gradient
// (one row per batch row) with the golden expected object: its "loss",
// "metrics" and gradField. With noTerm, a null gradient is none at all (a
// KL or entropy function with no term, "none") and is not compared;
// otherwise it is compared as any other.
func (k *Checker) LossJSON(expected json.RawMessage, gradField string, noTerm bool, loss float64, metrics map[string]float64, grad [][]float64) error {
	var want map[string]json.RawMessage
	if err := json.Unmarshal(expected, &want); err != nil {
		return err
	}
	var wl Float // absent or null: 0
	if raw, ok := want["loss"]; ok {
		if err := json.Unmarshal(raw, &wl); err != nil {
			return err
		}
	}
	k.Scalar("loss", loss, float64(wl))
	if err := k.MetricsJSON("metrics", metrics, want["metrics"]); err != nil {
		return err
	}
	if noTerm && string(want[gradField]) == "null" {
		return nil
	}
	return k.MatrixJSON(gradField, grad, want[gradField])
}

// Runner evaluates one case of its kind and records mismatches in chk. It
// returns the error the implementation returned (if any); when the golden case
// expects an error, a non-nil error means the case passes.
type Runner func(c *Case, chk *Checker) error

// Kind is one kind of golden file ("policy_loss", "advantage", …): its
// name, what its vectors check, and its Runner.
type Kind = registry.Spec[Runner]

// Registry holds the runners of a run by kind, and how their cases are
// judged.
type Registry struct {
	runners *registry.Registry[Runner]
	// Tol, when set, replaces every case's own tolerance (a device's float32
	// storage is checked at 1e-5 relative, the float64 paths at the cases').
	Tol *Tolerance
	// Reference, when set, judges the cases that fail: each is run again
	// with Reference's runner of its kind, at the same tolerance. A case
	// that fails there too is ill-conditioned — the inputs as this registry
	// stores them (e.g. rounded to float32) do not determine the expected
	// values within the tolerance — and is reported in Report.Ill, not
	// counted as failed.
	Reference *Registry
}

// NewRegistry returns the registry of kinds; a kind given twice is an error.
func NewRegistry(kinds ...Kind) (*Registry, error) {
	r, err := registry.New("conformance kind", kinds...)
	if err != nil {
		return nil, err
	}
	return &Registry{runners: r}, nil
}

// Kinds returns the registered kinds, sorted.
func (r *Registry) Kinds() []string { return r.runners.Names() }

// runner returns the runner of kind; false when there is none.
func (r *Registry) runner(kind string) (Runner, bool) {
	k, err := r.runners.Get(kind)
	return k.New, err == nil
}

// Report is the outcome of a run.
type Report struct {
	Passed, Failed, Skipped int
	Mismatches              []Mismatch
	// Ill are the mismatches of the ill-conditioned cases (Registry.Reference).
	Ill []Mismatch
	// IllConditioned counts those cases.
	IllConditioned int
}

// Summary is the closing line, exactly "N passed, M failed, K skipped".
func (r Report) Summary() string {
	return fmt.Sprintf("%d passed, %d failed, %d skipped", r.Passed, r.Failed, r.Skipped)
}

// Load reads one golden file.
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, schema.Errorf(path, -1, "", "cannot read the golden file: %v", errors.Unwrap(err))
	}
	var f File
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, schema.Errorf(path, -1, "", "not a golden file: %v", err)
	}
	return &f, nil
}

// RunFile runs every case of one file. Cases of a kind with no runner are skipped.
func RunFile(f *File, reg *Registry, rep *Report) {
	run, ok := reg.runner(f.Kind)
	if !ok {
		rep.Skipped += len(f.Cases)
		return
	}
	for i := range f.Cases {
		c := &f.Cases[i]
		got := check(run, c, reg.Tol)
		switch {
		case len(got) == 0:
			rep.Passed++
		case reg.Reference != nil && reg.Reference.fails(f.Kind, c, reg.Tol):
			rep.IllConditioned++
			rep.Ill = append(rep.Ill, got...)
		default:
			rep.Failed++
			rep.Mismatches = append(rep.Mismatches, got...)
		}
	}
}

// check runs one case at tol (nil: the case's own) and returns its
// mismatches.
func check(run Runner, c *Case, tol *Tolerance) []Mismatch {
	chk := NewChecker(c)
	if tol != nil {
		chk.Tol = *tol
	}
	err := safeRun(run, c, chk)
	wantErr, wantMsg := c.ExpectedError()
	switch {
	case wantErr && err == nil:
		chk.Failf("error", "no error", wantMsg)
	case wantErr:
		chk.Mismatches = nil // the reference raised and so did we
	case err != nil:
		chk.Failf("error", err.Error(), "no error")
	}
	return chk.Mismatches
}

// fails reports whether case c of kind fails at tol with the registry's
// runner (a kind it has no runner for does not fail).
func (r *Registry) fails(kind string, c *Case, tol *Tolerance) bool {
	run, ok := r.runner(kind)
	return ok && len(check(run, c, tol)) > 0
}

// safeRun turns a panic in an implementation into a reported error, so one
// broken case does not hide the others.
func safeRun(run Runner, c *Case, chk *Checker) (err error) {
	defer func() {
		if p := recover(); p != nil {
			chk.Failf("panic", fmt.Sprint(p), "no panic")
			err = nil
		}
	}()
	return run(c, chk)
}

// RunDir runs the golden files of DIR for the given kinds (all files when kinds
// is empty). The file of kind K is DIR/K.json.
func RunDir(dir string, kinds []string, reg *Registry) (Report, error) {
	var rep Report
	if len(kinds) == 0 {
		matches, err := filepath.Glob(filepath.Join(dir, "*.json"))
		if err != nil {
			return rep, err
		}
		if len(matches) == 0 {
			return rep, schema.Errorf(dir, -1, "", "no golden files (KIND.json)")
		}
		sort.Strings(matches)
		for _, m := range matches {
			kinds = append(kinds, strings.TrimSuffix(filepath.Base(m), ".json"))
		}
	}
	for _, k := range kinds {
		f, err := Load(filepath.Join(dir, k+".json"))
		if err != nil {
			return rep, err
		}
		if f.Kind != k {
			return rep, schema.Errorf(filepath.Join(dir, k+".json"), -1, "", "holds kind %q", f.Kind)
		}
		RunFile(f, reg, &rep)
	}
	return rep, nil
}
