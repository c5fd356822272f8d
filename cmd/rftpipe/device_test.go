package main

import (
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/gpu"
)

// TestDeviceFlag: without a CUDA device, --device cuda is a bad-input error
// (exit 2) naming the reason, --device auto runs on the CPU and says so in
// one stderr line, and an unknown device is rejected.
func TestDeviceFlag(t *testing.T) {
	if ok, reason := gpu.Available(); ok {
		t.Skipf("a CUDA device is present (%s)", reason)
	}
	for _, args := range [][]string{
		{"loss", "--fn", "ppo", "--in", "../../fixtures/stores/demo.parquet", "--device", "cuda"},
		{"conformance", "../../fixtures/conformance", "--kind", "entropy", "--device", "cuda"},
		{"bench", "loss", "--fn", "ppo", "--shape", "4x8", "--device", "cuda"},
	} {
		_, stderr, code := runCLI(t, args...)
		if code != exitBadInput || !strings.Contains(stderr, "no CUDA device found: ") {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
	stdout, stderr, code := runCLI(t, "conformance", "../../fixtures/conformance", "--kind", "policy_loss,kl,entropy", "--device", "auto")
	if code != exitOK || !strings.HasSuffix(stdout, " 0 failed, 0 skipped\n") ||
		!strings.HasPrefix(stderr, "device: cpu (no CUDA device: ") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("conformance --device auto: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if _, _, code := runCLI(t, "loss", "--fn", "ppo", "--in", "../../fixtures/stores/demo.parquet", "--device", "tpu"); code != exitBadInput {
		t.Errorf("--device tpu: exit %d, want 2", code)
	}
}
