package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
