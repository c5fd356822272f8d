/*
 * nvrtc_shim.h — what NVRTC predefines, for a syntax and PTX check of the
 * kernels with clang (which compiles CUDA without the CUDA toolkit when
 * given -nocudainc -nocudalib). Used only by check.sh; NVRTC never sees it.
 */
#define __CUDACC__ 1
#define __CUDACC_RTC__ 1
#define __device__ __attribute__((device))
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))
#define __host__ __attribute__((host))
#define __forceinline__ __inline__ __attribute__((always_inline))
#include <__clang_cuda_builtin_vars.h>
extern "C" __device__ double exp(double);
extern "C" __device__ double log(double);
__device__ static inline double __shfl_down_sync(unsigned mask, double v, unsigned delta) {
	int lo = __nvvm_shfl_sync_down_i32(mask, (int)__builtin_bit_cast(long long, v), delta, 0x1f);
	int hi = __nvvm_shfl_sync_down_i32(mask, (int)(__builtin_bit_cast(long long, v) >> 32), delta, 0x1f);
	return __builtin_bit_cast(double, ((long long)hi << 32) | (unsigned)lo);
}
