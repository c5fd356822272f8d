// Package gpu evaluates rftpipe's loss, KL and entropy kernels on a CUDA
// GPU, as a second implementation of tokens.Evaluator behind the same
// registry, argument parsing, plans, finishing code and metric names as the
// CPU path (loss.EvalOn, kl and entropy LossOn): only the kernels differ.
//
// No CUDA toolkit is needed to build it and it does not use cgo: at run time
// it dlopens the driver (libcuda.so.1, or the file $RFTPIPE_CUDA names) and
// NVRTC (libnvrtc.so*, from the
// loader path, $RFTPIPE_NVRTC, $CUDA_HOME, $CUDA_PATH, /usr/local/cuda* or a
// Python environment's nvidia-cuda-nvrtc wheel) with purego, compiles the
// kernels of gpu/kernels (embedded) for the device's architecture at first
// use and caches the module for the process. Every driver and NVRTC call is
// checked; a failure is an *Error naming the call and the result code, e.g.
// "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY".
//
// The kernels are one family (rft_loss.cu): a row kernel instantiated per
// kernel kind, whose per-token math (rft_loss.h) mirrors the Go kernels sum
// for sum, writing the gradient and per-row partial sums accumulated in
// float64, then a finishing kernel that adds the partial sums in a fixed
// order — results are identical run to run. Inputs are stored as float32 by
// default (Options.Float64 for float64), moved once per batch through
// pinned memory, and batches larger than Options.ChunkTokens stream through
// two alternating buffer sets.
//
// Select maps a --device value (auto, cpu, cuda) to an evaluator. See
// NOTES.md for what was verified where.
package gpu
