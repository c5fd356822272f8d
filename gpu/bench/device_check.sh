#!/bin/sh
# device_check.sh — every GPU check and benchmark of rftpipe in one run on a
# GPU machine without Go: a few minutes when every step passes; each step
# has its own timeout, about 17 minutes in all at worst, so give the run
# 20. Build the carry on a machine
# with Go (gpu/NOTES.md, "Running the device checks"):
#
#   mkdir -p bin
#   go build -ldflags="-s -w" -o bin/rftpipe ./cmd/rftpipe
#   CGO_ENABLED=0 go test -c -ldflags="-s -w" -o bin/gpu.test ./gpu/
#   tar cJf carry.tar.xz bin gpu/bench pipeline/bench fixtures/conformance
#
# then on the GPU machine, from the unpacked directory:
#
#   sh gpu/bench/device_check.sh
#
# Logs go to $OUT (default ./out); one table prints last. torch rows need
# python3 with a CUDA torch; without it those cells read "-".
set -u
out=${OUT:-out}
mkdir -p "$out"
rf=bin/rftpipe
table="$out/table.txt"
: >"$table"
row() { printf '%-44s %s\n' "$1" "$2" >>"$table"; }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$out/device.txt" 2>&1
row "device" "$(head -1 "$out/device.txt") $(date -u +%Y-%m-%d)"

# 1. The gpu package's tests on the device.
(cd gpu && timeout 120 ../bin/gpu.test -test.v -test.count=1) >"$out/gpu_test.txt" 2>&1
row "gpu tests" "exit $?: $(grep -c '^--- PASS' "$out/gpu_test.txt") pass, $(grep -c '^--- FAIL' "$out/gpu_test.txt") fail, $(grep -c '^--- SKIP' "$out/gpu_test.txt") skip"

# 2. The README's conformance command: float64 storage, then float32.
timeout 60 $rf conformance fixtures/conformance --kind policy_loss,kl,entropy --device cuda >"$out/conformance64.txt" 2>&1
row "conformance --device cuda" "exit $?: $(tail -1 "$out/conformance64.txt")"
timeout 60 $rf conformance fixtures/conformance --kind policy_loss,kl,entropy --device cuda --float32 >"$out/conformance32.txt" 2>&1
row "conformance --device cuda --float32" "exit $?: $(tail -1 "$out/conformance32.txt")"

# 3. Kernel benchmarks: fraction of copy bandwidth, ratios to torch.
for shape in 4096x8192 1024x4096; do
	for fn in ppo gspo sapo; do
		timeout 90 $rf bench loss --fn $fn --shape $shape --device cuda --runs 20 --format json >"$out/bench_${fn}_$shape.json" 2>"$out/bench_${fn}_$shape.err"
		row "bench $fn $shape" "$(python3 -c 'import json,sys
r=json.load(open(sys.argv[1]))
f=lambda k: "%.2f" % r[k] if k in r else "-"
print("%.3f ms, %.0f%% of copy, x eager %s, x compile %s" % (r["median_ms"], 100*r["copy_fraction"], f("x_eager"), f("x_compile")))' "$out/bench_${fn}_$shape.json" 2>/dev/null || tail -1 "$out/bench_${fn}_$shape.err")"
	done
done

# 4. End to end: loss over a 20k x 1024 store (20M tokens, 79 record
# batches: each in flight on the device while the next is read), cuda vs
# cpu, same machine; the device memory used, sampled every 0.1 s while the
# cuda run lasts, must stay that of two record batches' buffers (plus the
# context), not grow with the store.
store="$out/store20k.parquet"
$rf gen --tasks 2500 --runs 8 --resp-len 1024 --with all --seed 26 --out "$store" >"$out/gen.txt" 2>&1
for dev in cpu cuda; do
	if [ $dev = cuda ]; then
		(while :; do nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits; sleep 0.1; done) >"$out/mem_cuda.txt" 2>/dev/null &
		mon=$!
	fi
	s=$(date +%s.%N)
	timeout 60 $rf loss --fn ppo --kl-loss-fn low_var_kl --in "$store" --device $dev --grad-out "$out/grad_$dev.parquet" >"$out/loss_$dev.txt" 2>&1
	rc=$?
	e=$(date +%s.%N)
	row "loss ppo 20k x 1024 --device $dev" "exit $rc: $(awk -v s="$s" -v e="$e" 'BEGIN { printf "%.2f", e - s }') s"
done
kill $mon 2>/dev/null
row "loss --device cuda: device memory" "peak $(sort -n "$out/mem_cuda.txt" | tail -1) MiB used (lowest sample $(sort -n "$out/mem_cuda.txt" | head -1)); store $(du -m "$store" | cut -f1) MB"
row "loss metrics cuda vs cpu" "$(python3 -c 'import re,sys
num=lambda p: [float(x) for x in re.findall(r"-?\d+\.\d+(?:e[-+]?\d+)?", open(p).read())]
a,b=num(sys.argv[1]),num(sys.argv[2])
print("max rel diff %.1e over %d numbers" % (max([abs(x-y)/max(abs(y),1e-300) for x,y in zip(a,b)] or [0]), len(a)) if len(a)==len(b) else "outputs differ in shape")' "$out/loss_cuda.txt" "$out/loss_cpu.txt")"
rm -f "$store" "$out"/grad_*.parquet

# 5. The machine's CPUs: every job at GOMAXPROCS 1, 2, 4, 8, 16 (the
# scaling table of the README's "Scaling with cores"), 100k experiences.
RFTPIPE=$rf timeout 150 bash pipeline/bench/scaling.sh >"$out/scaling.md" 2>&1
row "scaling table (pipeline/bench/scaling.sh)" "exit $?: $out/scaling.md"

cat "$table"
cat "$out/scaling.md"
