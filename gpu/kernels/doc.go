// Package kernels holds the CUDA sources of rftpipe's loss kernels —
// rft_loss.h (the per-token math of every kernel, plain C99 that NVRTC and a
// C compiler both accept) and rft_loss.cu (the row and reduction kernels) —
// which package gpu embeds and compiles with NVRTC at run time.
//
// With cgo, the package also compiles rft_loss.h as C and runs it on the CPU
// (Evaluator) through the same lowering as package gpu (gpu/internal/lower),
// so the kernel math is checked without a GPU: against the Go kernels of
// stages/loss, kl and entropy on random batches, and against the golden
// vectors, in float64 and with the float32 storage of inputs and gradient
// the GPU uses. Evaluator mirrors the CUDA row kernel step for step (row
// statistic, token pass, rft_row_fin, per-row partial sums); only the
// parallel block reduction is not exercised. Package gpu stays cgo-free.
package kernels
