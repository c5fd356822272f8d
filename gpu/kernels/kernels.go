//go:build cgo

package kernels

/*
#cgo CFLAGS: -O2 -std=c99 -Wall -Wextra -Werror
#cgo LDFLAGS: -lm
#include <stddef.h>
#include "rft_loss.h"

static size_t rft_kernel_size(void) { return sizeof(rft_kernel); }
static size_t rft_kernel_off_flag(void) { return offsetof(rft_kernel, flag); }
static size_t rft_kernel_off_p(void) { return offsetof(rft_kernel, p); }

static double rft_ld(const double *p, long long i) { return p ? p[i] : 0.0; }

// rft_host_rows is rft_rows of rft_loss.cu, one row after the other: row i
// of rows[] writes its partial sums at partial[i*RFT_MAXRED] and its per-row
// outputs at rowout[2i]. f32 rounds the gradient to float32 as the device's
// float32 storage does.
static void rft_host_rows(const rft_kernel *k, const long long *off, const int *rows, int nrows,
                          const double *lp, const double *old, const double *ref, const double *adv,
                          const double *mask, const double *ent, const double *count, const double *scale,
                          const double *gscale, double *grad, double *partial, double *rowout, int f32) {
	for (int i = 0; i < nrows; i++) {
		const int r = rows[i];
		const long long lo = off[r], hi = off[r + 1];
		rft_tok t;
		double stat = 0;
		if (rft_has_stat(k)) {
			double acc = 0;
			for (long long j = lo; j < hi; j++) {
				t.lp = rft_ld(lp, j), t.old = rft_ld(old, j), t.ref = 0, t.adv = 0, t.m = rft_ld(mask, j), t.ent = 0;
				rft_stat_tok(k, &t, &acc);
			}
			stat = rft_stat_fin(k, acc, count[r]);
		}
		double red[RFT_MAXRED] = {0}, s[RFT_MAXRED] = {0};
		for (long long j = lo; j < hi; j++) {
			t.lp = rft_ld(lp, j), t.old = rft_ld(old, j), t.ref = rft_ld(ref, j), t.adv = rft_ld(adv, j);
			t.m = rft_ld(mask, j), t.ent = rft_ld(ent, j);
			double v = rft_token(k, &t, stat, red);
			if (rft_writes_grad(k->kind)) {
				double g = gscale[r] * v;
				grad[j] = f32 ? (double)(float)g : g;
			}
		}
		if (rft_nred(k->kind) > 0)
			rft_row_fin(k, red, stat, scale[r], s, rowout + 2 * (long long)i);
		for (int j = 0; j < RFT_MAXRED; j++)
			partial[(long long)i * RFT_MAXRED + j] = s[j];
	}
}
*/
import "C"

import (
	"unsafe"

	"github.com/rftpipe/rftpipe/gpu/internal/lower"
	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// Layout reports sizeof(rft_kernel) and the offsets of its flag and p
// fields as the C compiler lays them out.
func Layout() (size, flagOff, pOff uintptr) {
	return uintptr(C.rft_kernel_size()), uintptr(C.rft_kernel_off_flag()), uintptr(C.rft_kernel_off_p())
}

// Evaluator evaluates terms with the C build of the kernel header. F32
// stores inputs and gradient as float32, as the GPU does by default.
type Evaluator struct {
	F32 bool
}

// column returns the batch's input (nil when absent), rounded to float32
// when e.F32.
func (e Evaluator) column(b *tokens.Batch, name string) []float64 {
	c := b.Col(name)
	if c == nil || !e.F32 {
		return c
	}
	out := make([]float64, len(c))
	for i, x := range c {
		out[i] = float64(float32(x))
	}
	return out
}

func ptr(v []float64) *C.double {
	if len(v) == 0 {
		return nil
	}
	return (*C.double)(unsafe.Pointer(&v[0]))
}

// Eval implements tokens.Evaluator.
func (e Evaluator) Eval(b *tokens.Batch, grad []float64, terms ...tokens.Term) ([]tokens.TermResult, error) {
	if len(grad) != b.Rows.Tokens() {
		return nil, schema.BadInputf("gradient buffer has %d tokens, the batch has %d", len(grad), b.Rows.Tokens())
	}
	p, err := lower.Lower(b, terms)
	if err != nil {
		return nil, err
	}
	off := make([]int64, len(b.Rows.Off))
	for i, o := range b.Rows.Off {
		off[i] = int64(o)
	}
	lp, old, ref := e.column(b, tokens.LogProb), e.column(b, tokens.OldLogProb), e.column(b, tokens.RefLogProb)
	adv, mask, ent := e.column(b, tokens.Advantages), e.column(b, tokens.ActionMask), e.column(b, tokens.Entropy)
	f32 := C.int(0)
	if e.F32 {
		f32 = 1
	}
	gradBuf := grad
	if len(gradBuf) == 0 {
		gradBuf = make([]float64, 1) // a valid pointer for an empty batch
	}
	sums := make([][]float64, len(p.Terms))
	for i, t := range p.Terms {
		sums[i] = make([]float64, lower.MaxRed)
		n := len(t.Rows)
		if n == 0 {
			continue
		}
		rows := make([]C.int, n)
		for j, r := range t.Rows {
			rows[j] = C.int(r)
		}
		partial := make([]float64, n*lower.MaxRed)
		rowout := make([]float64, 2*n)
		k := C.rft_kernel{kind: C.int(t.Kernel.Kind)}
		for j := range 3 {
			k.flag[j] = C.int(t.Kernel.Flag[j])
		}
		for j := range 8 {
			k.p[j] = C.double(t.Kernel.P[j])
		}
		C.rft_host_rows(&k, (*C.longlong)(unsafe.Pointer(&off[0])), &rows[0], C.int(n),
			ptr(lp), ptr(old), ptr(ref), ptr(adv), ptr(mask), ptr(ent),
			ptr(p.Count), ptr(p.Scale), ptr(p.GradScale), ptr(gradBuf), ptr(partial), ptr(rowout), f32)
		for j := 0; j < n; j++ {
			for s := range lower.MaxRed {
				sums[i][s] += partial[j*lower.MaxRed+s]
			}
			if t.RowOut != nil {
				r := t.Rows[j]
				t.RowOut[2*r], t.RowOut[2*r+1] = rowout[2*j], rowout[2*j+1]
			}
		}
	}
	for _, r := range p.Zero {
		lo, hi := b.Rows.Span(int(r))
		clear(grad[lo:hi])
	}
	return p.Results(sums), nil
}
