#!/bin/sh
# device_run.sh — everything issue 6 needs measured on a GPU machine, in one
# call of the device tool. Build on the development machine first (the
# device machine has no Go), then carry bin/:
#
#   go build -o bin/rftpipe ./cmd/rftpipe
#   CGO_ENABLED=0 go test -c -o bin/gpu.test ./gpu/
#   device run --carry bin 'sh gpu/bench/device_run.sh'
#
# Writes full logs to $OUT (or ./out) and prints a short summary last.
set -u
out=${OUT:-out}
mkdir -p "$out"
{
	nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
	ls /usr/local/cuda/lib64/libnvrtc.so* 2>/dev/null
} >"$out/device.txt" 2>&1
# 1. GPU tests: golden cases (float32 and float64 storage), CPU agreement on
#    10 random stores per loss, determinism and chunking.
(cd gpu && ../bin/gpu.test -test.v -test.count=1) >"$out/gpu_test.txt" 2>&1
echo "gpu tests: exit $?" >>"$out/summary.txt"
# 2. The conformance command on the device.
bin/rftpipe conformance fixtures/conformance --kind policy_loss,kl,entropy --device cuda >"$out/conformance.txt" 2>&1
echo "conformance --device cuda: exit $?, $(tail -1 "$out/conformance.txt")" >>"$out/summary.txt"
# 3. rftpipe's kernels and torch eager, same shapes, same machine.
for fn in ppo gspo sapo dpo; do
	for shape in 1024x4096 4096x8192; do
		bin/rftpipe bench loss --fn $fn --shape $shape --device cuda --runs 20 --format json
	done
done >"$out/bench_rftpipe.jsonl" 2>"$out/bench_rftpipe.err"
python3 gpu/bench/torch_bench.py --json "$out/bench_torch.jsonl" >"$out/bench_torch.txt" 2>&1
cat "$out/device.txt" "$out/summary.txt"
grep -E '^(--- |ok|FAIL|PASS)' "$out/gpu_test.txt" | tail -12
cat "$out/bench_rftpipe.jsonl" "$out/bench_torch.txt"
