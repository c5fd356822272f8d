package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/ebitengine/purego"

	"github.com/rftpipe/rftpipe/gpu"
	"github.com/rftpipe/rftpipe/pipeline"
	"github.com/rftpipe/rftpipe/pipeline/builder"
	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// fakeChild marks the test binary re-run with the fake CUDA driver: the
// device is probed once per process, so the fake one gets a process of its
// own.
const fakeChild = "RFTPIPE_TEST_FAKECUDA"

// onFakeCUDA runs the calling test again in a child process whose CUDA
// driver and NVRTC are the fake of gpu/testdata/fakecuda (kernels run on
// the CPU with the kernel header's math), and reports whether the caller is
// that child. It skips without a C compiler.
func onFakeCUDA(t *testing.T) bool {
	t.Helper()
	if os.Getenv(fakeChild) == "1" {
		return true
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler (cc) to build the fake CUDA driver")
	}
	lib := filepath.Join(t.TempDir(), "libfakecuda.so")
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-O1", "-std=gnu99", "-I../../gpu/kernels",
		"-o", lib, "../../gpu/testdata/fakecuda/fakecuda.c", "-lm").CombinedOutput(); err != nil {
		t.Fatalf("building the fake CUDA driver: %v\n%s", err, out)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v")
	cmd.Env = append(os.Environ(), fakeChild+"=1", "RFTPIPE_CUDA="+lib, "RFTPIPE_NVRTC="+lib)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("on the fake CUDA driver: %v\n%s", err, out)
	}
	t.Logf("on the fake CUDA driver:\n%s", out)
	return false
}

// TestConformanceOnFakeCUDA: the README's device command exits 0 on a
// correct device and says what it checked — float64 storage at each case's
// tolerance; with --float32, float32 storage at 1e-5 / 1e-6 with the
// ill-conditioned cases listed apart — and a wrong value still fails.
func TestConformanceOnFakeCUDA(t *testing.T) {
	if !onFakeCUDA(t) {
		return
	}
	const dir = "../../fixtures/conformance"
	kinds := "policy_loss,kl,entropy"
	stdout, stderr, code := runCLI(t, "conformance", dir, "--kind", kinds, "--device", "cuda")
	if code != exitOK || stdout != "checking on cuda: Fake CUDA (CPU) (sm_90, 4 SMs), float64 storage, at each case's own tolerance\n"+
		"169 passed, 0 failed, 0 skipped\n" {
		t.Errorf("float64: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	stdout, stderr, code = runCLI(t, "conformance", dir, "--kind", kinds, "--device", "cuda", "--float32")
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != exitOK || !strings.HasPrefix(lines[0], "checking on cuda: Fake CUDA (CPU) (sm_90, 4 SMs), float32 storage, at rtol 1e-05 / atol 1e-06") ||
		!strings.Contains(lines[len(lines)-1], " 0 failed, 0 skipped") {
		t.Errorf("float32: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	for _, l := range lines[1 : len(lines)-1] {
		if !strings.HasPrefix(l, "ill-conditioned for float32 storage: ") {
			t.Errorf("float32: unexpected line %q", l)
		}
	}
	// A wrong golden value fails in float64 storage; float32 storage cannot
	// tell it from an ill-conditioned case (the CPU on float32 inputs misses
	// it too) and lists it as such.
	b, err := os.ReadFile(filepath.Join(dir, "entropy.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f map[string]any
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	c1 := f["cases"].([]any)[1].(map[string]any)
	c1["expected"].(map[string]any)["loss"] = 42.0
	tampered := t.TempDir()
	b, _ = json.Marshal(f)
	if err := os.WriteFile(filepath.Join(tampered, "entropy.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, _, code = runCLI(t, "conformance", tampered, "--device", "cuda")
	if code != exitFailure || !strings.HasSuffix(stdout, "10 passed, 1 failed, 0 skipped\n") {
		t.Errorf("tampered, float64: exit %d, stdout %q", code, stdout)
	}
	stdout, _, code = runCLI(t, "conformance", tampered, "--device", "cuda", "--float32")
	if code != exitOK || !strings.Contains(stdout, "ill-conditioned for float32 storage: "+c1["name"].(string)+": loss: got") ||
		!strings.HasSuffix(stdout, "10 passed, 0 failed, 0 skipped (1 ill-conditioned for float32 storage, not failed)\n") {
		t.Errorf("tampered, float32: exit %d, stdout %q", code, stdout)
	}
	if _, _, code := runCLI(t, "conformance", dir, "--kind", "entropy", "--device", "cpu", "--float32"); code != exitBadInput {
		t.Errorf("--float32 on the CPU: exit %d, want %d", code, exitBadInput)
	}
}

// syncOnly hides an evaluator's Start: the loss stage then evaluates every
// batch before the next is read, the synchronous path.
type syncOnly struct{ tokens.Evaluator }

// TestLossOnFakeCUDA: `loss --device cuda --grad-out` — each batch's
// evaluation in flight while the next is read and started, its gradient
// written while the next computes — writes the bytes of the synchronous
// device path, and agrees with --device cpu (float32 storage: 1e-6); the
// device memory it holds is set by the record batch, the same for a store
// 4× the rows; a kernel fault on any batch exits 1 naming it, leaves no
// gradient file and no goroutine.
func TestLossOnFakeCUDA(t *testing.T) {
	if !onFakeCUDA(t) {
		return
	}
	lib, err := purego.Dlopen(os.Getenv("RFTPIPE_CUDA"), purego.RTLD_NOW)
	if err != nil {
		t.Fatal(err)
	}
	sym := func(name string) uintptr {
		p, err := purego.Dlsym(lib, name)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	deviceBytes, failLaunch := sym("fakecuda_device_bytes"), sym("fakecuda_fail_launch")
	live := func() uint64 {
		var live, peak uint64
		purego.SyscallN(deviceBytes, uintptr(unsafe.Pointer(&live)), uintptr(unsafe.Pointer(&peak)))
		return live
	}
	dir := t.TempDir()
	gen := func(name string, tasks int) string {
		path := filepath.Join(dir, name)
		// Fixed-length responses: every record batch (a row group: an
		// explore batch of 32 tasks × 8 runs) has the same tokens.
		if _, stderr, code := runCLI(t, "gen", "--tasks", fmt.Sprint(tasks), "--runs", "8", "--resp-len", "24", "--prompt-len", "8",
			"--with", "all", "--seed", "26", "--out", path); code != exitOK {
			t.Fatalf("gen: exit %d: %s", code, stderr)
		}
		return path
	}
	small, large := gen("small.parquet", 1500), gen("large.parquet", 6000) // 47 and 188 record batches
	lossArgs := func(in, out, device string) []string {
		return []string{"loss", "--fn", "ppo", "--kl-loss-fn", "low_var_kl", "--entropy-coef", "0.001", "--in", in, "--grad-out", out, "--device", device, "--format", "json"}
	}
	var held []uint64
	for _, in := range []string{small, large} {
		name := strings.TrimSuffix(filepath.Base(in), ".parquet")
		cuda, cpu := filepath.Join(dir, name+"_cuda.parquet"), filepath.Join(dir, name+"_cpu.parquet")
		before := live()
		cudaOut, stderr, code := runCLI(t, lossArgs(in, cuda, "cuda")...)
		if code != exitOK {
			t.Fatalf("%s --device cuda: exit %d: %s", name, code, stderr)
		}
		held = append(held, live()-before) // the command's evaluator lives for the process
		cpuOut, stderr, code := runCLI(t, lossArgs(in, cpu, "cpu")...)
		if code != exitOK {
			t.Fatalf("%s --device cpu: exit %d: %s", name, code, stderr)
		}
		// The synchronous device path: the same job, its evaluator without
		// Start.
		o := &builder.LossOptions{Common: builder.Common{In: in, Step: 1, Log: io.Discard}, Fn: "ppo", KLLossFn: "low_var_kl", KLCoef: 0.001,
			EntropyLossFn: "default", EntropyCoef: 0.001, GradOut: filepath.Join(dir, name+"_sync.parquet"), Device: "cpu"}
		j, err := o.Job()
		if err != nil {
			t.Fatal(err)
		}
		ev, _, err := gpu.Select("cuda", io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		j.Stages = []pipeline.Stage{pipeline.NewLoss(j.Objective, syncOnly{ev}, nil, 1)}
		if _, err := pipeline.Run(context.Background(), *j); err != nil {
			t.Fatal(err)
		}
		if fileSum(t, j.Out) != fileSum(t, cuda) {
			t.Errorf("%s: the overlapped gradient file differs from the synchronous one", name)
		}
		var rc, rp lossOutput
		if err := json.Unmarshal([]byte(cudaOut), &rc); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(cpuOut), &rp); err != nil {
			t.Fatal(err)
		}
		if rc.Rows != rp.Rows || rc.Tokens != rp.Tokens || len(rc.Metrics) != len(rp.Metrics) || len(rc.Metrics) < 5 {
			t.Fatalf("%s: cuda %d rows %d tokens %d metrics, cpu %d %d %d", name, rc.Rows, rc.Tokens, len(rc.Metrics), rp.Rows, rp.Tokens, len(rp.Metrics))
		}
		for k, v := range rp.Metrics {
			if c := rc.Metrics[k]; v == nil || c == nil || math.Abs(*c-*v) > 1e-6*math.Max(1, math.Abs(*v)) {
				t.Errorf("%s: %s cuda %v, cpu %v", name, k, c, v)
			}
		}
		// Without --grad-out: the same evaluation on the device, the same
		// metrics.
		noGrad := slices.DeleteFunc(lossArgs(in, "", "cuda"), func(a string) bool { return a == "--grad-out" || a == "" })
		metricsOut, stderr, code := runCLI(t, noGrad...)
		if code != exitOK {
			t.Fatalf("%s --device cuda without --grad-out: exit %d: %s", name, code, stderr)
		}
		var rm lossOutput
		if err := json.Unmarshal([]byte(metricsOut), &rm); err != nil {
			t.Fatal(err)
		}
		if rm.Rows != rc.Rows || len(rm.Metrics) != len(rc.Metrics) {
			t.Fatalf("%s without --grad-out: %d rows %d metrics, with it %d %d", name, rm.Rows, len(rm.Metrics), rc.Rows, len(rc.Metrics))
		}
		for k, v := range rc.Metrics {
			if m := rm.Metrics[k]; m == nil || math.Abs(*m-*v) > 1e-12*math.Max(1, math.Abs(*v)) {
				t.Errorf("%s: %s without --grad-out %v, with it %v", name, k, m, v)
			}
		}
		gc, gp := readGrad(t, cuda), readGrad(t, cpu)
		if len(gc) != rc.Tokens || len(gp) != len(gc) {
			t.Fatalf("%s: %d and %d gradient values, %d tokens", name, len(gc), len(gp), rc.Tokens)
		}
		for i, v := range gp {
			if math.Abs(float64(gc[i]-v)) > 1e-6*math.Max(1e-3, math.Abs(float64(v))) {
				t.Fatalf("%s: grad[%d] cuda %v, cpu %v", name, i, gc[i], v)
			}
		}
	}
	// Two buffer sets of one record batch (256 rows × 24 tokens) of six
	// float32 inputs and the gradient, with per-row data: the same for 4×
	// the rows, a fraction of the store's.
	t.Logf("device bytes held: %d (47 record batches), %d (188)", held[0], held[1])
	if limit := uint64(2 * 256 * 24 * 7 * 4 * 3 / 2); held[0] == 0 || held[1] != held[0] || held[0] > limit {
		t.Errorf("device bytes held: %d (47 record batches), %d (188); limit %d", held[0], held[1], limit)
	}

	goroutines := runtime.NumGoroutine()
	for _, k := range []int{1, 9, 30} { // kernel launches: a few per term and batch
		out := filepath.Join(dir, fmt.Sprintf("fault%d.parquet", k))
		purego.SyscallN(failLaunch, uintptr(k))
		_, stderr, code := runCLI(t, lossArgs(large, out, "cuda")...)
		purego.SyscallN(failLaunch, 0)
		if code != exitFailure || !strings.Contains(stderr, "cuStreamSynchronize: CUDA_ERROR_LAUNCH_FAILED") || strings.Count(stderr, "\n") != 1 {
			t.Errorf("launch %d faulting: exit %d, stderr %q", k, code, stderr)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("launch %d faulting: %s left behind (%v)", k, out, err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > goroutines && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > goroutines {
		t.Errorf("%d goroutines after the faulted runs, %d before", n, goroutines)
	}
}

// readGrad returns the grad_logprob values of a gradient file, in order.
func readGrad(t *testing.T, path string) []float32 {
	t.Helper()
	r, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []float32
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		lst := rec.Column(rec.Schema().FieldIndices(schema.GradLogprob)[0]).(*array.List)
		out = append(out, lst.ListValues().(*array.Float32).Float32Values()...)
	}
}
