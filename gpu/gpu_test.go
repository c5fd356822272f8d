package gpu

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/pipeline/golden"
	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/entropy"
	"github.com/rftpipe/rftpipe/stages/kl"
	"github.com/rftpipe/rftpipe/stages/loss"
	"github.com/rftpipe/rftpipe/stages/objective"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// device returns the CUDA device or skips the test.
func device(t testing.TB) *Device {
	t.Helper()
	d, err := Open()
	if err != nil {
		t.Skipf("no CUDA device: %v", firstLine(err.Error()))
	}
	return d
}

func TestSelectCPU(t *testing.T) {
	var log bytes.Buffer
	ev, name, err := Select("cpu", &log)
	if err != nil || name != "cpu" || ev != tokens.CPU || log.Len() != 0 {
		t.Fatalf("Select(cpu) = %v, %q, %v, log %q", ev, name, err, log.String())
	}
}

func TestSelectUnknown(t *testing.T) {
	_, _, err := Select("tpu", &bytes.Buffer{})
	if !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), "auto, cpu, cuda") {
		t.Fatalf("Select(tpu) error %v", err)
	}
}

// TestSelectWithoutDevice: cuda fails with a bad-input error naming the
// reason; auto falls back to the CPU and says so in one line.
func TestSelectWithoutDevice(t *testing.T) {
	if ok, reason := Available(); ok {
		t.Skipf("a CUDA device is present (%s)", reason)
	}
	_, _, err := Select("cuda", &bytes.Buffer{})
	if !errors.Is(err, schema.ErrBadInput) || !strings.HasPrefix(err.Error(), "no CUDA device found: ") {
		t.Fatalf("Select(cuda) error %v", err)
	}
	var log bytes.Buffer
	ev, name, err := Select("auto", &log)
	if err != nil || name != "cpu" || ev != tokens.CPU {
		t.Fatalf("Select(auto) = %v, %q, %v", ev, name, err)
	}
	if s := log.String(); !strings.HasPrefix(s, "device: cpu (no CUDA device: ") || strings.Count(s, "\n") != 1 {
		t.Fatalf("auto fallback line %q", s)
	}
}

func TestErrorNamesCall(t *testing.T) {
	err := error(&Error{Call: "cuMemAlloc", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY"})
	if err.Error() != "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY" {
		t.Fatalf("error text %q", err)
	}
}

// TestNVRTCCandidates: an explicit RFTPIPE_NVRTC comes first, and NVRTC
// libraries under CUDA_HOME are found newest first, builtins skipped.
func TestNVRTCCandidates(t *testing.T) {
	home := t.TempDir()
	lib := filepath.Join(home, "lib64")
	if err := os.MkdirAll(lib, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"libnvrtc.so.12", "libnvrtc.so.13", "libnvrtc-builtins.so.13"} {
		if err := os.WriteFile(filepath.Join(lib, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("CUDA_HOME", home)
	t.Setenv("RFTPIPE_NVRTC", "/opt/x/libnvrtc.so")
	c := nvrtcCandidates()
	if c[0] != "/opt/x/libnvrtc.so" {
		t.Fatalf("first candidate %q", c[0])
	}
	i13, i12 := slices.Index(c, filepath.Join(lib, "libnvrtc.so.13")), slices.Index(c, filepath.Join(lib, "libnvrtc.so.12"))
	if i13 < 0 || i12 < 0 || i13 > i12 || slices.Contains(c, filepath.Join(lib, "libnvrtc-builtins.so.13")) {
		t.Fatalf("candidates %v", c)
	}
}

// TestGoldenOnDevice runs every device-evaluated golden case on the GPU:
// float32 storage within 1e-5 relative (1e-6 absolute), float64 storage
// within each case's own tolerance.
func TestGoldenOnDevice(t *testing.T) {
	d := device(t)
	for _, c := range []struct {
		name string
		opt  Options
		f32  bool
	}{
		{"float32", Options{}, true},
		{"float64", Options{Float64: true}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ev := d.NewEvaluator(c.opt)
			defer ev.Close()
			reps, err := golden.RunDevice("../fixtures/conformance", ev, c.f32)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range reps {
				t.Logf("%s on %s: %d passed, %d failed, %d skipped", r.Kind, d, r.Passed, r.Failed, r.Skipped)
				for _, m := range r.Mismatches {
					t.Errorf("%s", m)
				}
				for _, m := range r.Ill {
					t.Logf("ill-conditioned for float32 storage: %s", m)
				}
			}
		})
	}
}

// relClose is the agreement rule of CPU (float64) and GPU (float32
// storage) results.
func relClose(got, want float64) bool {
	if math.IsNaN(want) {
		return math.IsNaN(got)
	}
	return math.Abs(got-want) <= 1e-6+1e-5*math.Abs(want)
}

func agree(t *testing.T, what string, gv, cv float64, gm, cm agg.Metrics, gg, cg []float64) {
	t.Helper()
	if !relClose(gv, cv) {
		t.Errorf("%s: value GPU %v, CPU %v", what, gv, cv)
	}
	for k, v := range cm {
		if g, ok := gm[k]; !ok || !relClose(g, v) {
			t.Errorf("%s: metric %s GPU %v, CPU %v", what, k, g, v)
		}
	}
	for i := range cg {
		if !relClose(gg[i], cg[i]) {
			t.Errorf("%s: grad[%d] GPU %v, CPU %v", what, i, gg[i], cg[i])
			return
		}
	}
}

// TestAgreesWithCPU evaluates every loss (default arguments), KL function
// and entropy function on 10 random stores each, on the GPU and the CPU.
func TestAgreesWithCPU(t *testing.T) {
	d := device(t)
	ev := d.NewEvaluator(Options{})
	defer ev.Close()
	stores := make([]*tokens.Batch, 10)
	for i := range stores {
		stores[i] = tokens.Synthetic(2*(1+i*7%32), 1+i*131%700, uint64(100+i))
	}
	for _, name := range loss.Default().Names() {
		l, err := loss.New(loss.Default(), name, nil)
		if err != nil {
			t.Fatal(err)
		}
		if l.Def.CPUOnly {
			continue
		}
		for i, b := range stores {
			gg, cg := make([]float64, b.Rows.Tokens()), make([]float64, b.Rows.Tokens())
			cr, err := l.EvalOn(tokens.CPU, b, cg)
			if err != nil {
				t.Fatal(err)
			}
			gr, err := l.EvalOn(ev, b, gg)
			if err != nil {
				t.Fatal(err)
			}
			agree(t, fmt.Sprintf("%s store %d", name, i), gr.Loss, cr.Loss, gr.Metrics, cr.Metrics, gg, cg)
		}
	}
	for _, name := range kl.Registry().Names() {
		f, err := kl.New(name, args.Values{"kl_coef": 0.1})
		if err != nil {
			t.Fatal(err)
		}
		for i, b := range stores {
			gg, cg := make([]float64, b.Rows.Tokens()), make([]float64, b.Rows.Tokens())
			cv, cm, _ := f.LossOn(tokens.CPU, b, agg.SeqMeanTokenMean, cg)
			gv, gm, err := f.LossOn(ev, b, agg.SeqMeanTokenMean, gg)
			if err != nil {
				t.Fatal(err)
			}
			agree(t, fmt.Sprintf("kl %s store %d", name, i), gv, cv, gm, cm, gg, cg)
		}
	}
	for _, name := range entropy.Registry().Names() {
		f, err := entropy.New(name, args.Values{"entropy_coef": 0.01})
		if err != nil {
			t.Fatal(err)
		}
		for i, b := range stores {
			gg, cg := make([]float64, b.Rows.Tokens()), make([]float64, b.Rows.Tokens())
			cv, cm, _ := f.LossOn(tokens.CPU, b, agg.TokenMean, cg)
			gv, gm, err := f.LossOn(ev, b, agg.TokenMean, gg)
			if err != nil {
				t.Fatal(err)
			}
			agree(t, fmt.Sprintf("entropy %s store %d", name, i), gv, cv, gm, cm, gg, cg)
		}
	}
}

// TestDeterministicAndChunked: two evaluations give identical bits, and a
// batch streamed in many small chunks agrees with one resident chunk.
func TestDeterministicAndChunked(t *testing.T) {
	d := device(t)
	b := tokens.Synthetic(64, 900, 9)
	l, err := loss.New(loss.Default(), "gspo", nil)
	if err != nil {
		t.Fatal(err)
	}
	eval := func(opt Options) (float64, agg.Metrics, []float64) {
		ev := d.NewEvaluator(opt)
		defer ev.Close()
		g := make([]float64, b.Rows.Tokens())
		r, err := l.EvalOn(ev, b, g)
		if err != nil {
			t.Fatal(err)
		}
		return r.Loss, r.Metrics, g
	}
	v1, m1, g1 := eval(Options{Float64: true})
	v2, m2, g2 := eval(Options{Float64: true})
	if math.Float64bits(v1) != math.Float64bits(v2) || !slices.Equal(g1, g2) || fmt.Sprint(m1) != fmt.Sprint(m2) {
		t.Fatalf("two runs differ: %v %v", v1, v2)
	}
	v3, m3, g3 := eval(Options{Float64: true, ChunkTokens: 5000})
	if math.Abs(v3-v1) > 1e-12*math.Abs(v1) || !slices.Equal(g1, g3) {
		t.Fatalf("chunked %v, resident %v", v3, v1)
	}
	for k, v := range m1 {
		if math.Abs(m3[k]-v) > 1e-12*math.Abs(v)+1e-15 {
			t.Fatalf("chunked %s %v, resident %v", k, m3[k], v)
		}
	}
}

// BenchmarkLossGPU times forward + gradient of PPO, GSPO, SAPO and DPO on
// the device (kernel time by CUDA events), reporting the median kernel time,
// Gtok/s, GB/s and the fraction of the measured device-to-device copy
// bandwidth:
//
//	go test -run '^$' -bench LossGPU -benchtime 1x ./gpu/
func BenchmarkLossGPU(b *testing.B) {
	d := device(b)
	copyBW, err := d.CopyBandwidth(1 << 30)
	if err != nil {
		b.Fatal(err)
	}
	for _, fn := range []string{"ppo", "gspo", "sapo", "dpo"} {
		for _, shape := range [][2]int{{1024, 4096}, {4096, 8192}} {
			b.Run(fmt.Sprintf("%s/%dx%d", fn, shape[0], shape[1]), func(b *testing.B) {
				o, err := objective.PolicyOnly(fn)
				if err != nil {
					b.Fatal(err)
				}
				var r objective.BenchResult
				for b.Loop() {
					if r, err = d.BenchLoss(o, shape[0], shape[1], 20, 1, copyBW); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(r.MedianMs, "kernel-ms")
				b.ReportMetric(r.MtokPerS/1e3, "Gtok/s")
				b.ReportMetric(r.GBPerS, "GB/s")
				b.ReportMetric(r.CopyFraction, "of-copy-bw")
			})
		}
	}
}

// TestTorchTimesUnknownFn: a loss torch_bench.py lacks gives no ratio and
// says which it has.
func TestTorchTimesUnknownFn(t *testing.T) {
	if _, _, err := TorchTimes("gpg", 2, 8, 1); err == nil || !strings.Contains(err.Error(), "ppo, gspo, sapo, dpo") {
		t.Fatalf("error %v", err)
	}
}
