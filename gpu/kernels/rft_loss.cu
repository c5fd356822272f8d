// rft_loss.cu — the loss kernel family, compiled at run time by NVRTC.
//
// One generic row kernel, instantiated per kernel kind (template KIND, so the
// per-token switch of rft_loss.h folds to one case) and per storage type T
// (float or double; arithmetic is double either way):
//
//   rft_rows_k<KIND>_<f32|f64>  one block per row of a term: optional row
//       statistic (block reduction, broadcast), then one pass over the row's
//       tokens writing grad and accumulating the kernel's reductions in
//       double, then a fixed-order block reduction whose result thread 0
//       turns into the row's partial sums (rft_row_fin).
//   rft_finish                  one block per sum: adds the rows' partial
//       sums in a fixed order. No atomics anywhere: results are identical
//       run to run for a given block size.
//   rft_zero_rows_<f32|f64>     zero the gradient of rows no term covers.
#include "rft_loss.h"

#define RFT_WARPS 32 // most warps per block (1024 threads)

// warp_sum adds v over the warp; lane 0 holds the total (fixed tree).
__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_down_sync(0xffffffffu, v, o);
	return v;
}

// block_sum reduces v[0..n) over the block in a fixed order; thread 0 gets
// the totals. sh holds RFT_WARPS·n doubles. Ends with a barrier, so sh may be
// reused right after.
template <int N>
__device__ __forceinline__ void block_sum(double *v, double *sh) {
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
#pragma unroll
	for (int i = 0; i < N; i++) {
		v[i] = warp_sum(v[i]);
		if (lane == 0)
			sh[i * RFT_WARPS + warp] = v[i];
	}
	__syncthreads();
	if (warp == 0) {
#pragma unroll
		for (int i = 0; i < N; i++)
			v[i] = warp_sum(lane < nw ? sh[i * RFT_WARPS + lane] : 0.0);
	}
	__syncthreads();
}

template <typename T>
__device__ __forceinline__ double ld(const T *p, long long i) {
	return p ? (double)p[i] : 0.0;
}

// rft_rows evaluates the rows rows[blockIdx.x] of one term. off holds the
// rows' token offsets into the input arrays (B+1 entries); count, scale and
// gscale are per row. partial receives RFT_MAXRED sums per block (row of
// the term), rowout two values per block (DPO sums).
template <int KIND, typename T>
__device__ __forceinline__ void rft_rows(rft_kernel k, const long long *__restrict__ off, const int *__restrict__ rows,
                                         const T *__restrict__ lp, const T *__restrict__ old,
                                         const T *__restrict__ ref, const T *__restrict__ adv,
                                         const T *__restrict__ mask, const T *__restrict__ ent, const double *__restrict__ count,
                                         const double *__restrict__ scale, const double *__restrict__ gscale,
                                         T *__restrict__ grad, double *__restrict__ partial,
                                         double *__restrict__ rowout) {
	__shared__ double sh[RFT_MAXRED * RFT_WARPS];
	__shared__ double stat_sh;
	k.kind = KIND; // constant from here on: rft_token's switch folds
	const int r = rows[blockIdx.x];
	const long long lo = off[r], hi = off[r + 1];
	rft_tok t;
	double stat = 0;
	if (rft_has_stat(&k)) {
		double acc = 0;
		for (long long i = lo + threadIdx.x; i < hi; i += blockDim.x) {
			t.lp = ld(lp, i), t.old = ld(old, i), t.ref = 0, t.adv = 0, t.m = ld(mask, i), t.ent = 0;
			rft_stat_tok(&k, &t, &acc);
		}
		block_sum<1>(&acc, sh);
		if (threadIdx.x == 0)
			stat_sh = rft_stat_fin(&k, acc, count[r]);
		__syncthreads();
		stat = stat_sh;
	}
	double red[RFT_MAXRED];
#pragma unroll
	for (int j = 0; j < RFT_MAXRED; j++)
		red[j] = 0;
	const double gs = gscale[r];
	for (long long i = lo + threadIdx.x; i < hi; i += blockDim.x) {
		t.lp = ld(lp, i), t.old = ld(old, i), t.ref = ld(ref, i), t.adv = ld(adv, i), t.m = ld(mask, i);
		t.ent = ld(ent, i);
		double v = rft_token(&k, &t, stat, red);
		if (rft_writes_grad(KIND))
			grad[i] = (T)(gs * v);
	}
	if (rft_nred(KIND) == 0)
		return;
	block_sum<RFT_MAXRED>(red, sh);
	if (threadIdx.x == 0) {
		double s[RFT_MAXRED];
#pragma unroll
		for (int j = 0; j < RFT_MAXRED; j++)
			s[j] = 0;
		rft_row_fin(&k, red, stat, scale[r], s, rowout + 2 * (long long)blockIdx.x);
#pragma unroll
		for (int j = 0; j < RFT_MAXRED; j++)
			partial[(long long)blockIdx.x * RFT_MAXRED + j] = s[j];
	}
}

#define RFT_ROWS_ARGS(T)                                                                                      \
	rft_kernel k, const long long *off, const int *rows, const T *lp, const T *old, const T *ref, const T *adv, \
	    const T *mask, const T *ent, const double *count, const double *scale, const double *gscale, T *grad, double *partial, \
	    double *rowout
#define RFT_ROWS_CALL k, off, rows, lp, old, ref, adv, mask, ent, count, scale, gscale, grad, partial, rowout

#define RFT_DEFINE(KIND)                                                                                          \
	extern "C" __global__ void rft_rows_k##KIND##_f32(RFT_ROWS_ARGS(float)) { rft_rows<KIND, float>(RFT_ROWS_CALL); } \
	extern "C" __global__ void rft_rows_k##KIND##_f64(RFT_ROWS_ARGS(double)) { rft_rows<KIND, double>(RFT_ROWS_CALL); }

RFT_DEFINE(0)
RFT_DEFINE(1)
RFT_DEFINE(2)
RFT_DEFINE(3)
RFT_DEFINE(4)
RFT_DEFINE(5)
RFT_DEFINE(6)
RFT_DEFINE(7)
RFT_DEFINE(8)
RFT_DEFINE(9)
RFT_DEFINE(10)
RFT_DEFINE(11)
RFT_DEFINE(12)
RFT_DEFINE(13)
RFT_DEFINE(14)

// rft_finish: out[j] = Σ_{i<n} partial[i·RFT_MAXRED + j] for j = blockIdx.x,
// in a fixed order.
extern "C" __global__ void rft_finish(const double *partial, int n, double *out) {
	__shared__ double sh[RFT_WARPS];
	double v = 0;
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		v += partial[(long long)i * RFT_MAXRED + blockIdx.x];
	block_sum<1>(&v, sh);
	if (threadIdx.x == 0)
		out[blockIdx.x] = v;
}

template <typename T>
__device__ __forceinline__ void zero_rows(const long long *off, const int *rows, T *grad) {
	const int r = rows[blockIdx.x];
	for (long long i = off[r] + threadIdx.x; i < off[r + 1]; i += blockDim.x)
		grad[i] = 0;
}

extern "C" __global__ void rft_zero_rows_f32(const long long *off, const int *rows, float *grad) { zero_rows(off, rows, grad); }
extern "C" __global__ void rft_zero_rows_f64(const long long *off, const int *rows, double *grad) { zero_rows(off, rows, grad); }
