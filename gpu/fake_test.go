package gpu

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/rftpipe/rftpipe/pipeline/golden"
	"github.com/rftpipe/rftpipe/stages/loss"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

var (
	fakeOnce sync.Once
	fakeLib  string
	fakeErr  error
	fakeDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if fakeDir != "" {
		os.RemoveAll(fakeDir)
	}
	os.Exit(code)
}

// fakeDevice opens the fake CUDA driver and NVRTC of
// testdata/fakecuda (built here with the system C compiler), whose
// cuLaunchKernel runs the kernels' math on the CPU. It skips without a C
// compiler.
func fakeDevice(t *testing.T) *Device {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler (cc) to build the fake CUDA driver")
	}
	fakeOnce.Do(func() {
		// Read the sources here so that go test's cache sees them change.
		for _, f := range []string{"testdata/fakecuda/fakecuda.c", "kernels/rft_loss.h"} {
			if _, fakeErr = os.ReadFile(f); fakeErr != nil {
				return
			}
		}
		if fakeDir, fakeErr = os.MkdirTemp("", "rftpipe-fakecuda"); fakeErr != nil {
			return
		}
		fakeLib = filepath.Join(fakeDir, "libfakecuda.so")
		out, err := exec.Command(cc, "-shared", "-fPIC", "-O1", "-std=gnu99", "-Wall", "-Werror", "-Ikernels",
			"-o", fakeLib, "testdata/fakecuda/fakecuda.c", "-lm").CombinedOutput()
		if err != nil {
			fakeErr = fmt.Errorf("building the fake CUDA driver: %v\n%s", err, out)
		}
	})
	if fakeErr != nil {
		t.Fatal(fakeErr)
	}
	d, err := openFrom([]string{fakeLib}, []string{fakeLib})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestFakeOpen(t *testing.T) {
	d := fakeDevice(t)
	if s := d.String(); s != "Fake CUDA (CPU) (sm_90, 4 SMs)" {
		t.Fatalf("device %q", s)
	}
}

// TestFakeGolden runs the golden cases through the whole host side of the
// CUDA evaluator (float32 and float64 storage, one chunk and many).
func TestFakeGolden(t *testing.T) {
	d := fakeDevice(t)
	for _, c := range []struct {
		name string
		opt  Options
		f32  bool
	}{
		{"float32", Options{}, true},
		{"float64", Options{Float64: true}, false},
		{"float64-chunked", Options{Float64: true, ChunkTokens: 3}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ev := d.NewEvaluator(c.opt)
			defer ev.Close()
			reps, err := golden.RunDevice("../fixtures/conformance", ev, c.f32)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range reps {
				t.Logf("%s: %d passed, %d failed, %d skipped", r.Kind, r.Passed, r.Failed, r.Skipped)
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

// TestFakeAgreesWithCPU: float64 storage reproduces the CPU path to
// rounding, for every loss, resident and streamed in small chunks.
func TestFakeAgreesWithCPU(t *testing.T) {
	d := fakeDevice(t)
	for _, chunk := range []int{0, 700} {
		ev := d.NewEvaluator(Options{Float64: true, ChunkTokens: chunk})
		for _, name := range loss.Default().Names() {
			if s, _ := loss.Default().Get(name); s.New.CPUOnly {
				continue // no device form (dro's default arguments do not even build)
			}
			l, err := loss.New(loss.Default(), name, nil)
			if err != nil {
				t.Fatal(err)
			}
			for seed := uint64(1); seed <= 3; seed++ {
				b := tokens.Synthetic(12+int(seed), 200*int(seed), seed)
				cg, gg := make([]float64, b.Rows.Tokens()), make([]float64, b.Rows.Tokens())
				cr, err := l.EvalOn(tokens.CPU, b, cg)
				if err != nil {
					t.Fatal(err)
				}
				gr, err := l.EvalOn(ev, b, gg)
				if err != nil {
					t.Fatal(err)
				}
				cv, cm, gv, gm := cr.Loss, cr.Metrics, gr.Loss, gr.Metrics
				near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-13+1e-12*math.Abs(b) }
				if !near(gv, cv) {
					t.Errorf("%s chunk %d seed %d: loss %v, CPU %v", name, chunk, seed, gv, cv)
				}
				for k, v := range cm {
					if !near(gm[k], v) {
						t.Errorf("%s chunk %d seed %d: %s %v, CPU %v", name, chunk, seed, k, gm[k], v)
					}
				}
				for i := range cg {
					if !near(gg[i], cg[i]) {
						t.Errorf("%s chunk %d seed %d: grad[%d] %v, CPU %v", name, chunk, seed, i, gg[i], cg[i])
						break
					}
				}
			}
		}
		if err := ev.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFakeTiming: kernel time comes from the events, bytes from the
// kernels' inputs and outputs (PPO: 4 inputs read and 1 gradient written,
// float32).
func TestFakeTiming(t *testing.T) {
	d := fakeDevice(t)
	ev := d.NewEvaluator(Options{Timing: true, ChunkTokens: 1000})
	defer ev.Close()
	b := tokens.Synthetic(8, 300, 1)
	l, err := loss.New(loss.Default(), "ppo", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.EvalOn(ev, b, make([]float64, b.Rows.Tokens())); err != nil {
		t.Fatal(err)
	}
	ms, bytes := ev.TakeTiming()
	if ms != 3 || bytes != int64(b.Rows.Tokens())*5*4 { // 3 chunks of ≤ 1000 tokens, 1 ms each (fake events)
		t.Fatalf("timing %v ms, %d bytes; want 3 ms, %d bytes", ms, bytes, b.Rows.Tokens()*20)
	}
	if ms, bytes = ev.TakeTiming(); ms != 0 || bytes != 0 {
		t.Fatalf("TakeTiming did not reset: %v, %d", ms, bytes)
	}
}

// TestFakeErrorsNameTheCall: a failing driver call surfaces as an error
// naming the call and the driver's error name.
func TestFakeErrorsNameTheCall(t *testing.T) {
	d := fakeDevice(t)
	h, err := purego.Dlopen(fakeLib, purego.RTLD_NOW)
	if err != nil {
		t.Fatal(err)
	}
	setOOM, err := purego.Dlsym(h, "fakecuda_set_oom")
	if err != nil {
		t.Fatal(err)
	}
	purego.SyscallN(setOOM, 1000)
	defer purego.SyscallN(setOOM, 0)
	ev := d.NewEvaluator(Options{})
	defer ev.Close()
	b := tokens.Synthetic(8, 300, 1)
	l, err := loss.New(loss.Default(), "ppo", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.EvalOn(ev, b, make([]float64, b.Rows.Tokens()))
	if err == nil || !strings.Contains(err.Error(), "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY") {
		t.Fatalf("error %v", err)
	}
}

// fakeDeviceBytes returns the fake device's allocated bytes, now and at
// most since it was loaded.
func fakeDeviceBytes(t *testing.T) (live, peak uint64) {
	t.Helper()
	h, err := purego.Dlopen(fakeLib, purego.RTLD_NOW)
	if err != nil {
		t.Fatal(err)
	}
	f, err := purego.Dlsym(h, "fakecuda_device_bytes")
	if err != nil {
		t.Fatal(err)
	}
	purego.SyscallN(f, uintptr(unsafe.Pointer(&live)), uintptr(unsafe.Pointer(&peak)))
	return live, peak
}

// TestFakeMemoryBounded: the device memory an evaluator holds is set by
// its chunk size, not by the data: 30 batches of assorted sizes, streamed
// twice, leave it unchanged through the second pass and within two buffer
// sets of one chunk; the same batch gives the same bits every time, and
// Close returns every byte.
func TestFakeMemoryBounded(t *testing.T) {
	d := fakeDevice(t)
	live0, _ := fakeDeviceBytes(t)
	const chunk = 2000
	ev := d.NewEvaluator(Options{ChunkTokens: chunk})
	l, err := loss.New(loss.Default(), "ppo", nil)
	if err != nil {
		t.Fatal(err)
	}
	var held uint64
	total := 0
	for i := range 60 {
		k := i % 30
		b := tokens.Synthetic(4+k%13, 50+(k*37)%400, uint64(k%5))
		total += b.Rows.Tokens()
		g1, g2 := make([]float64, b.Rows.Tokens()), make([]float64, b.Rows.Tokens())
		r1, err := l.EvalOn(ev, b, g1)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := l.EvalOn(ev, b, g2)
		if err != nil {
			t.Fatal(err)
		}
		for j := range g1 {
			if math.Float64bits(g1[j]) != math.Float64bits(g2[j]) {
				t.Fatalf("batch %d: grad[%d] %v then %v", i, j, g1[j], g2[j])
			}
		}
		if math.Float64bits(r1.Loss) != math.Float64bits(r2.Loss) {
			t.Fatalf("batch %d: loss %v then %v", i, r1.Loss, r2.Loss)
		}
		live, _ := fakeDeviceBytes(t)
		if i == 29 {
			held = live - live0
		}
		if i > 29 && live-live0 != held {
			t.Fatalf("batch %d: the evaluator holds %d device bytes, %d after the first pass", i, live-live0, held)
		}
	}
	// Two buffer sets of ≤ chunk tokens × 6 inputs and the gradient
	// (float32), plus per-row metadata and sums: far below the tokens seen.
	if limit := uint64(2 * chunk * 7 * 4 * 3); held == 0 || held > limit || held >= uint64(total)*4 {
		t.Fatalf("the evaluator holds %d device bytes (limit %d; %d tokens streamed)", held, limit, total)
	}
	if err := ev.Close(); err != nil {
		t.Fatal(err)
	}
	if live, _ := fakeDeviceBytes(t); live != live0 {
		t.Fatalf("after Close %d device bytes allocated, %d before", live, live0)
	}
}

// TestFakeOverlapped: evaluations started before the previous one is
// collected (Start of window i+1, then Wait for window i) give, window by
// window, the bits of one Eval at a time — sums and gradient — and agree
// with the CPU; two runs give the same bits; the device memory held is that
// of the one-at-a-time path.
func TestFakeOverlapped(t *testing.T) {
	d := fakeDevice(t)
	const chunk = 900
	var windows []*tokens.Batch
	for i := range 9 {
		windows = append(windows, tokens.Synthetic(3+i%5, 60+(i*131)%500, uint64(i)))
	}
	for _, name := range []string{"ppo", "gspo", "sapo", "opmd"} {
		l, err := loss.New(loss.Default(), name, nil)
		if err != nil {
			t.Fatal(err)
		}
		type out struct {
			res  [][]tokens.TermResult
			grad [][]float64
			held uint64
		}
		evaluate := func(overlap bool) out {
			live0, _ := fakeDeviceBytes(t)
			ev := d.NewEvaluator(Options{Float64: true, ChunkTokens: chunk})
			var o out
			var prev tokens.Pending
			for _, b := range windows {
				p, err := l.Plan(b)
				if err != nil {
					t.Fatal(err)
				}
				g := make([]float64, b.Rows.Tokens())
				o.grad = append(o.grad, g)
				if !overlap {
					res, err := ev.Eval(b, g, p.Terms...)
					if err != nil {
						t.Fatal(err)
					}
					o.res = append(o.res, res)
					continue
				}
				next, err := ev.Start(b, g, p.Terms...)
				if err != nil {
					t.Fatal(err)
				}
				if prev != nil {
					res, err := prev.Wait()
					if err != nil {
						t.Fatal(err)
					}
					o.res = append(o.res, res)
				}
				prev = next
			}
			if overlap {
				res, err := prev.Wait()
				if err != nil {
					t.Fatal(err)
				}
				o.res = append(o.res, res)
			}
			live, _ := fakeDeviceBytes(t)
			o.held = live - live0
			if err := ev.Close(); err != nil {
				t.Fatal(err)
			}
			return o
		}
		same := func(what string, a, b out) {
			if a.held != b.held {
				t.Errorf("%s %s: %d device bytes held, %d", name, what, a.held, b.held)
			}
			for w := range windows {
				for i, r := range a.res[w] {
					for j, v := range r.Sums {
						if math.Float64bits(v) != math.Float64bits(b.res[w][i].Sums[j]) {
							t.Fatalf("%s %s: window %d term %d sum %d %v, %v", name, what, w, i, j, v, b.res[w][i].Sums[j])
						}
					}
				}
				for j, v := range a.grad[w] {
					if math.Float64bits(v) != math.Float64bits(b.grad[w][j]) {
						t.Fatalf("%s %s: window %d grad[%d] %v, %v", name, what, w, j, v, b.grad[w][j])
					}
				}
			}
		}
		seq, ov1, ov2 := evaluate(false), evaluate(true), evaluate(true)
		same("overlapped vs one at a time", ov1, seq)
		same("two overlapped runs", ov2, ov1)
		for w, b := range windows {
			p, err := l.Plan(b)
			if err != nil {
				t.Fatal(err)
			}
			cg := make([]float64, b.Rows.Tokens())
			cres, err := tokens.CPU.Eval(b, cg, p.Terms...)
			if err != nil {
				t.Fatal(err)
			}
			near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-13+1e-12*math.Abs(b) }
			for i, r := range cres {
				for j, v := range r.Sums {
					if !near(ov1.res[w][i].Sums[j], v) {
						t.Fatalf("%s window %d term %d sum %d: %v, CPU %v", name, w, i, j, ov1.res[w][i].Sums[j], v)
					}
				}
			}
			for j, v := range cg {
				if !near(ov1.grad[w][j], v) {
					t.Fatalf("%s window %d grad[%d]: %v, CPU %v", name, w, j, ov1.grad[w][j], v)
				}
			}
		}
	}
}

// TestFakeFaultInFlight: a kernel that faults while evaluations overlap —
// in the first window, in the middle, in the last — fails the evaluation
// (at a Wait, or at the Start that needs its buffer set) with an error
// naming the call; the evaluator then evaluates as before, bit for bit, and
// Close returns every byte.
func TestFakeFaultInFlight(t *testing.T) {
	d := fakeDevice(t)
	failLaunch := faultingLaunch(t)
	l, err := loss.New(loss.Default(), "ppo", nil)
	if err != nil {
		t.Fatal(err)
	}
	var windows []*tokens.Batch
	for i := range 6 {
		windows = append(windows, tokens.Synthetic(3+i%4, 80+(i*97)%300, uint64(i)))
	}
	// overlapped evaluates the windows, each started before the previous is
	// collected, and returns the first error.
	overlapped := func(ev *Evaluator) error {
		var prev tokens.Pending
		for _, b := range append(windows, nil) {
			var next tokens.Pending
			if b != nil {
				p, err := l.Plan(b)
				if err != nil {
					t.Fatal(err)
				}
				if next, err = ev.Start(b, make([]float64, b.Rows.Tokens()), p.Terms...); err != nil {
					return err
				}
			}
			if prev != nil {
				if _, err := prev.Wait(); err != nil {
					return err
				}
			}
			prev = next
		}
		return nil
	}
	b := windows[0]
	p, err := l.Plan(b)
	if err != nil {
		t.Fatal(err)
	}
	clean := d.NewEvaluator(Options{ChunkTokens: 700})
	want := make([]float64, b.Rows.Tokens())
	wantRes, err := clean.Eval(b, want, p.Terms...)
	if err != nil {
		t.Fatal(err)
	}
	if err := clean.Close(); err != nil {
		t.Fatal(err)
	}
	live0, _ := fakeDeviceBytes(t)
	for _, k := range []int{1, 5, 13} { // launches: two per window, chunk by chunk
		ev := d.NewEvaluator(Options{ChunkTokens: 700})
		failLaunch(k)
		if err := overlapped(ev); err == nil || !strings.Contains(err.Error(), "cuStreamSynchronize: CUDA_ERROR_LAUNCH_FAILED") {
			t.Errorf("launch %d faulting: err %v", k, err)
		}
		failLaunch(0)
		got := make([]float64, b.Rows.Tokens())
		res, err := ev.Eval(b, got, p.Terms...)
		if err != nil {
			t.Fatal(err)
		}
		for j := range got {
			if math.Float64bits(got[j]) != math.Float64bits(want[j]) {
				t.Fatalf("after launch %d faulted: grad[%d] %v, %v", k, j, got[j], want[j])
			}
		}
		for j, v := range res[0].Sums {
			if math.Float64bits(v) != math.Float64bits(wantRes[0].Sums[j]) {
				t.Fatalf("after launch %d faulted: sum %d %v, %v", k, j, v, wantRes[0].Sums[j])
			}
		}
		if err := ev.Close(); err != nil {
			t.Fatal(err)
		}
		if live, _ := fakeDeviceBytes(t); live != live0 {
			t.Fatalf("after Close %d device bytes allocated, %d before", live, live0)
		}
	}
}

// TestFakeClosedInFlight: closing the evaluator with an evaluation in
// flight makes that evaluation's Wait fail (no panic, no partial sums), and
// an evaluation started after Close fails at once.
func TestFakeClosedInFlight(t *testing.T) {
	d := fakeDevice(t)
	l, err := loss.New(loss.Default(), "ppo", nil)
	if err != nil {
		t.Fatal(err)
	}
	b := tokens.Synthetic(6, 400, 1)
	p, err := l.Plan(b)
	if err != nil {
		t.Fatal(err)
	}
	ev := d.NewEvaluator(Options{Float64: true, ChunkTokens: 500})
	pending, err := ev.Start(b, make([]float64, b.Rows.Tokens()), p.Terms...)
	if err != nil {
		t.Fatal(err)
	}
	if err := ev.Close(); err != nil {
		t.Fatal(err)
	}
	if res, err := pending.Wait(); !errors.Is(err, errClosed) || res != nil {
		t.Fatalf("Wait after Close: %v, %v; want errClosed", res, err)
	}
	if _, err := ev.Start(b, make([]float64, b.Rows.Tokens()), p.Terms...); !errors.Is(err, errClosed) {
		t.Fatalf("Start after Close: %v; want errClosed", err)
	}
}

// TestFakeCloseFailingFailsEveryOwner: a Close whose first stream sync
// fails (a kernel faulted) still fails every evaluation in flight: none's
// Wait returns the sums it had so far as good.
func TestFakeCloseFailingFailsEveryOwner(t *testing.T) {
	d := fakeDevice(t)
	failLaunch := faultingLaunch(t)
	l, err := loss.New(loss.Default(), "ppo", nil)
	if err != nil {
		t.Fatal(err)
	}
	b := tokens.Synthetic(6, 400, 1) // 2,400 tokens: chunks in both slots
	p, err := l.Plan(b)
	if err != nil {
		t.Fatal(err)
	}
	ev := d.NewEvaluator(Options{Float64: true, ChunkTokens: 500})
	failLaunch(11) // a launch of the chunks still in flight when Start returns
	pending, err := ev.Start(b, make([]float64, b.Rows.Tokens()), p.Terms...)
	if err != nil {
		t.Fatal(err)
	}
	if err := ev.Close(); err == nil {
		t.Fatal("Close after a faulted launch: no error")
	}
	failLaunch(0)
	if res, err := pending.Wait(); err == nil || res != nil {
		t.Fatalf("Wait after a failed Close: %v, %v; want an error and no sums", res, err)
	}
}

// faultingLaunch returns the fake driver's fault switch: the k-th kernel
// launch from now on faults (0: none). The test's end switches it off.
func faultingLaunch(t *testing.T) func(k int) {
	t.Helper()
	h, err := purego.Dlopen(fakeLib, purego.RTLD_NOW)
	if err != nil {
		t.Fatal(err)
	}
	sym, err := purego.Dlsym(h, "fakecuda_fail_launch")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { purego.SyscallN(sym, 0) })
	return func(k int) { purego.SyscallN(sym, uintptr(k)) }
}
