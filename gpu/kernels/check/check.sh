#!/bin/sh
# check.sh — compile the CUDA kernels to PTX with clang (no CUDA toolkit
# needed: `apt-get install clang`), as a syntax and codegen check on machines
# without NVRTC. Prints the kernel entry points and any local-memory use
# (register arrays spilled to .local would be a performance bug).
# Not part of the test suite; NVRTC compiles the kernels at run time.
set -eu
cd "$(dirname "$0")/.."
out=${1:-/tmp/rft_loss.ptx}
clang -x cuda --cuda-device-only --cuda-gpu-arch=sm_80 -nocudainc -nocudalib \
	-Xclang -target-feature -Xclang +ptx70 -std=c++17 -Wall -Wextra -Werror \
	-include check/nvrtc_shim.h -O2 -S -o "$out" rft_loss.cu
echo "entries: $(grep -c '\.entry' "$out")"
if grep -q '\.local' "$out"; then echo "local memory used:"; grep -n '\.local' "$out"; exit 1; fi
echo "no local memory"
