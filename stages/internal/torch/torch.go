// Package torch holds the elementwise functions of torch that the per-token
// kernels (stages/loss, stages/kl) reproduce together with their derivative,
// as autograd defines it.
package torch

// Clamp is torch.clamp(x, lo, hi) and its derivative with respect to x: 1
// inside [lo, hi], bounds included, 0 outside. NaN stays NaN (derivative 1).
func Clamp(x, lo, hi float64) (float64, float64) {
	switch {
	case x < lo:
		return lo, 0
	case x > hi:
		return hi, 0
	}
	return x, 1
}
