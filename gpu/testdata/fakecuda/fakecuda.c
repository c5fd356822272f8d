/*
 * fakecuda.c — a stand-in for libcuda.so.1 and libnvrtc.so on machines
 * without a GPU, built by gpu's tests (fake_test.go) with the system C
 * compiler. "Device" memory is host memory; cuLaunchKernel runs the kernels
 * of rft_loss.cu on the CPU, block after block, with the per-token math of
 * rft_loss.h, reading its arguments exactly as the CUDA kernels declare them.
 * This exercises package gpu's host side end to end — dlopen and purego
 * calls, NVRTC options and headers, argument marshalling, chunking, pinned
 * staging, per-row metadata, downloads and error naming — everything except
 * the CUDA kernels' own thread-parallel code.
 *
 * fakecuda_set_oom(n) makes cuMemAlloc fail for more than n bytes (0: never);
 * fakecuda_fail_launch(n) makes the n-th kernel launched from then on (1:
 * the next; 0: none) fault: as on a device, its launch succeeds and the
 * fault surfaces at the next cuStreamSynchronize, CUDA_ERROR_LAUNCH_FAILED
 * (once: unlike a device's, the fake's context stays usable);
 * fakecuda_device_bytes(&live, &peak) reports the device bytes allocated.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rft_loss.h"

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

#define OK 0
#define ERR_INVALID_VALUE 1
#define ERR_OOM 2
#define ERR_NOT_FOUND 500
#define ERR_LAUNCH_FAILED 719

/* ---- driver ---- */

CUresult cuInit(unsigned flags) { return flags == 0 ? OK : ERR_INVALID_VALUE; }
CUresult cuDriverGetVersion(int *v) { *v = 13000; return OK; }
CUresult cuDeviceGetCount(int *n) { *n = 1; return OK; }
CUresult cuDeviceGet(int *d, int ordinal) { *d = ordinal; return ordinal == 0 ? OK : 101; }
CUresult cuDeviceGetName(char *name, int len, int dev) {
	(void)dev;
	snprintf(name, (size_t)len, "Fake CUDA (CPU)");
	return OK;
}
CUresult cuDeviceGetAttribute(int *v, int attr, int dev) {
	(void)dev;
	switch (attr) {
	case 75: *v = 9; return OK;  /* compute capability major */
	case 76: *v = 0; return OK;  /* minor */
	case 16: *v = 4; return OK;  /* multiprocessors */
	}
	return ERR_INVALID_VALUE;
}
static int the_ctx;
CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev) { (void)dev; *ctx = &the_ctx; return OK; }
CUresult cuCtxSetCurrent(void *ctx) { return ctx == &the_ctx ? OK : 201; }

static int module_loaded;
CUresult cuModuleLoadData(void **mod, const void *image) {
	if (strcmp((const char *)image, "FAKECUBIN sm_90") != 0)
		return 200; /* CUDA_ERROR_INVALID_IMAGE */
	module_loaded = 1;
	*mod = &module_loaded;
	return OK;
}

#define MAXFN 64
static char fn_names[MAXFN][64];
static int nfn;
CUresult cuModuleGetFunction(void **fn, void *mod, const char *name) {
	if (mod != &module_loaded)
		return 400;
	if (strncmp(name, "rft_", 4) != 0)
		return ERR_NOT_FOUND;
	for (int i = 0; i < nfn; i++) {
		if (strcmp(fn_names[i], name) == 0) {
			*fn = fn_names[i];
			return OK;
		}
	}
	if (nfn == MAXFN)
		return ERR_NOT_FOUND;
	strncpy(fn_names[nfn], name, 63);
	*fn = fn_names[nfn++];
	return OK;
}

static size_t oom_above;
void fakecuda_set_oom(size_t n) { oom_above = n; }

/* Device bytes allocated now and at most (fakecuda_device_bytes); each
 * allocation carries its size in a 16-byte header. */
static size_t live_bytes, peak_bytes;
void fakecuda_device_bytes(size_t *live, size_t *peak) { *live = live_bytes; *peak = peak_bytes; }

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
	if (oom_above && n > oom_above)
		return ERR_OOM;
	char *m = malloc(16 + n);
	if (!m)
		return ERR_OOM;
	*(size_t *)m = n;
	live_bytes += n;
	if (live_bytes > peak_bytes)
		peak_bytes = live_bytes;
	memset(m + 16, 0xff, n); /* poison: unwritten outputs show as NaN */
	*p = (CUdeviceptr)(m + 16);
	return OK;
}
CUresult cuMemFree_v2(CUdeviceptr p) {
	if (!p)
		return OK;
	char *m = (char *)p - 16;
	live_bytes -= *(size_t *)m;
	free(m);
	return OK;
}
CUresult cuMemAllocHost_v2(void **p, size_t n) { *p = malloc(n); return *p ? OK : ERR_OOM; }
CUresult cuMemFreeHost(void *p) { free(p); return OK; }
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n, void *st) { (void)st; memcpy((void *)d, s, n); return OK; }
CUresult cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr s, size_t n, void *st) { (void)st; memcpy(d, (void *)s, n); return OK; }
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, void *st) { (void)st; memcpy((void *)d, (void *)s, n); return OK; }
CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, void *st) { (void)st; memset((void *)d, v, n); return OK; }

static long fail_countdown;
static int faulted;
void fakecuda_fail_launch(long n) { fail_countdown = n; faulted = 0; }

static int streams;
CUresult cuStreamCreate(void **s, unsigned flags) { (void)flags; *s = &streams; return OK; }
CUresult cuStreamSynchronize(void *s) {
	if (s != NULL && s != &streams)
		return 400;
	if (faulted) {
		faulted = 0;
		return ERR_LAUNCH_FAILED;
	}
	return OK;
}
CUresult cuStreamDestroy_v2(void *s) { return s == &streams ? OK : 400; }
static int events;
CUresult cuEventCreate(void **e, unsigned flags) { (void)flags; *e = &events; return OK; }
CUresult cuEventRecord(void *e, void *s) { (void)s; return e == &events ? OK : 400; }
CUresult cuEventSynchronize(void *e) { return e == &events ? OK : 400; }
CUresult cuEventElapsedTime(float *ms, void *a, void *b) { (void)a; (void)b; *ms = 1.0f; return OK; }
CUresult cuEventDestroy_v2(void *e) { return e == &events ? OK : 400; }

CUresult cuGetErrorName(CUresult rc, const char **name) {
	switch (rc) {
	case ERR_INVALID_VALUE: *name = "CUDA_ERROR_INVALID_VALUE"; return OK;
	case ERR_OOM: *name = "CUDA_ERROR_OUT_OF_MEMORY"; return OK;
	case ERR_NOT_FOUND: *name = "CUDA_ERROR_NOT_FOUND"; return OK;
	case ERR_LAUNCH_FAILED: *name = "CUDA_ERROR_LAUNCH_FAILED"; return OK;
	}
	return ERR_INVALID_VALUE;
}

/* One block of rft_rows<KIND, T>: the row rows[b]. */
#define ROWS_BLOCK(T)                                                                                          \
	static void rows_block_##T(const rft_kernel *k, void **a, int b) {                                       \
		const long long *off = *(const long long **)a[1];                                                    \
		const int *rows = *(const int **)a[2];                                                               \
		const T *lp = *(const T **)a[3], *old = *(const T **)a[4], *ref = *(const T **)a[5];                 \
		const T *adv = *(const T **)a[6], *mask = *(const T **)a[7], *ent = *(const T **)a[8];               \
		const double *count = *(const double **)a[9], *scale = *(const double **)a[10];                      \
		const double *gscale = *(const double **)a[11];                                                      \
		T *grad = *(T **)a[12];                                                                              \
		double *partial = *(double **)a[13], *rowout = *(double **)a[14];                                    \
		const int r = rows[b];                                                                               \
		rft_tok t;                                                                                           \
		double stat = 0;                                                                                     \
		if (rft_has_stat(k)) {                                                                               \
			double acc = 0;                                                                              \
			for (long long i = off[r]; i < off[r + 1]; i++) {                                            \
				t.lp = lp ? lp[i] : 0, t.old = old ? old[i] : 0, t.ref = 0, t.adv = 0;               \
				t.m = mask ? mask[i] : 0, t.ent = 0;                                                 \
				rft_stat_tok(k, &t, &acc);                                                           \
			}                                                                                            \
			stat = rft_stat_fin(k, acc, count[r]);                                                       \
		}                                                                                                    \
		double red[RFT_MAXRED] = {0}, s[RFT_MAXRED] = {0};                                                   \
		for (long long i = off[r]; i < off[r + 1]; i++) {                                                    \
			t.lp = lp ? lp[i] : 0, t.old = old ? old[i] : 0, t.ref = ref ? ref[i] : 0;                   \
			t.adv = adv ? adv[i] : 0, t.m = mask ? mask[i] : 0, t.ent = ent ? ent[i] : 0;                \
			double v = rft_token(k, &t, stat, red);                                                      \
			if (rft_writes_grad(k->kind))                                                                \
				grad[i] = (T)(gscale[r] * v);                                                        \
		}                                                                                                    \
		if (rft_nred(k->kind) == 0)                                                                          \
			return;                                                                                      \
		rft_row_fin(k, red, stat, scale[r], s, rowout + 2 * (long long)b);                                   \
		for (int j = 0; j < RFT_MAXRED; j++)                                                                 \
			partial[(long long)b * RFT_MAXRED + j] = s[j];                                               \
	}
ROWS_BLOCK(float)
ROWS_BLOCK(double)

CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void *stream, void **a, void **extra) {
	const char *name = (const char *)f;
	int kind;
	char type[8];
	(void)stream;
	if (gy != 1 || gz != 1 || by != 1 || bz != 1 || bx == 0 || bx > 1024 || bx % 32 != 0 || shared != 0 || extra)
		return ERR_INVALID_VALUE;
	if (fail_countdown > 0 && --fail_countdown == 0) {
		faulted = 1; /* reported at the next synchronisation */
		return OK;
	}
	if (sscanf(name, "rft_rows_k%d_%3s", &kind, type) == 2) {
		rft_kernel k = *(const rft_kernel *)a[0];
		if (k.kind != kind)
			return ERR_INVALID_VALUE; /* the descriptor must match the entry point */
		for (unsigned b = 0; b < gx; b++) {
			if (strcmp(type, "f32") == 0)
				rows_block_float(&k, a, (int)b);
			else
				rows_block_double(&k, a, (int)b);
		}
		return OK;
	}
	if (strcmp(name, "rft_finish") == 0) {
		const double *partial = *(const double **)a[0];
		int n = *(const int *)a[1];
		double *out = *(double **)a[2];
		for (unsigned j = 0; j < gx; j++) {
			double v = 0;
			for (int i = 0; i < n; i++)
				v += partial[(long long)i * RFT_MAXRED + j];
			out[j] = v;
		}
		return OK;
	}
	if (strncmp(name, "rft_zero_rows_f", 15) == 0) {
		const long long *off = *(const long long **)a[0];
		const int *rows = *(const int **)a[1];
		for (unsigned b = 0; b < gx; b++) {
			for (long long i = off[rows[b]]; i < off[rows[b] + 1]; i++) {
				if (name[15] == '3')
					(*(float **)a[2])[i] = 0;
				else
					(*(double **)a[2])[i] = 0;
			}
		}
		return OK;
	}
	return ERR_INVALID_VALUE;
}

/* ---- NVRTC ---- */

typedef struct {
	int ok;
	char log[256];
} prog;

int nvrtcVersion(int *major, int *minor) { *major = 13; *minor = 0; return 0; }
int nvrtcCreateProgram(prog **p, const char *src, const char *name, int nh, const char *const *hdrs, const char *const *names) {
	*p = calloc(1, sizeof(prog));
	(*p)->ok = strstr(src, "rft_rows_k") && strcmp(name, "rft_loss.cu") == 0 && nh == 1 &&
	           strcmp(names[0], "rft_loss.h") == 0 && strstr(hdrs[0], "rft_token");
	return 0;
}
int nvrtcCompileProgram(prog *p, int n, const char *const *opts) {
	int arch = 0;
	for (int i = 0; i < n; i++)
		if (strcmp(opts[i], "--gpu-architecture=sm_90") == 0)
			arch = 1;
	if (!p->ok || !arch) {
		snprintf(p->log, sizeof p->log, "fake nvrtc: sources or options not as expected");
		return 6; /* NVRTC_ERROR_COMPILATION */
	}
	return 0;
}
int nvrtcGetProgramLogSize(prog *p, size_t *n) { *n = strlen(p->log) + 1; return 0; }
int nvrtcGetProgramLog(prog *p, char *log) { strcpy(log, p->log); return 0; }
int nvrtcGetCUBINSize(prog *p, size_t *n) { (void)p; *n = sizeof "FAKECUBIN sm_90"; return 0; }
int nvrtcGetCUBIN(prog *p, char *out) { (void)p; strcpy(out, "FAKECUBIN sm_90"); return 0; }
int nvrtcDestroyProgram(prog **p) { free(*p); *p = NULL; return 0; }
const char *nvrtcGetErrorString(int rc) { return rc == 6 ? "NVRTC_ERROR_COMPILATION" : "NVRTC_ERROR_UNKNOWN"; }
