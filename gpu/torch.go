package gpu

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
)

//go:embed bench/torch_bench.py
var torchBench []byte

// TorchFns are the losses torch_bench.py implements.
var TorchFns = []string{"ppo", "gspo", "sapo", "dpo"}

// TorchTimes runs gpu/bench/torch_bench.py (embedded in the binary) with
// python3 for fn at rows × width, runs timed passes: the median ms of a
// forward + backward in torch eager and under torch.compile, on this
// machine's GPU. The error says why when python3, torch or its CUDA is
// missing, or torch_bench.py has no form of fn.
func TorchTimes(fn string, rows, width, runs int) (eager, compiled float64, err error) {
	if !slices.Contains(TorchFns, fn) {
		return 0, 0, fmt.Errorf("torch_bench.py has no %s (it has %s)", fn, strings.Join(TorchFns, ", "))
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		return 0, 0, fmt.Errorf("no python3")
	}
	cmd := exec.Command(py, "-", "--fns", fn, "--shapes", fmt.Sprintf("%dx%d", rows, width),
		"--runs", fmt.Sprint(runs), "--compile", "--json", "-")
	cmd.Stdin = bytes.NewReader(torchBench)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		return 0, 0, fmt.Errorf("torch_bench.py: %v: %s", err, lines[len(lines)-1])
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var r struct {
			Impl     string  `json:"impl"`
			MedianMs float64 `json:"median_ms"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return 0, 0, fmt.Errorf("torch_bench.py: %v", err)
		}
		switch r.Impl {
		case "torch-eager":
			eager = r.MedianMs
		case "torch-compile":
			compiled = r.MedianMs
		}
	}
	if eager == 0 || compiled == 0 {
		return 0, 0, fmt.Errorf("torch_bench.py gave no timing")
	}
	return eager, compiled, nil
}
