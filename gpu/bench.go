package gpu

import (
	"fmt"
	"slices"
	"unsafe"

	"github.com/rftpipe/rftpipe/stages/objective"
)

// BenchResult is one timing of a loss's forward + gradient on the device.
type BenchResult struct {
	Fn     string `json:"fn"`
	Shape  string `json:"shape"`
	Device string `json:"device"`
	// MedianMs is the median device time of the loss's kernels (CUDA
	// events; host↔device transfers excluded).
	MedianMs float64 `json:"median_ms"`
	MtokPerS float64 `json:"mtok_per_s"`
	// GBPerS is the fewest bytes the kernels must move (inputs read once,
	// gradient written once, float32) over MedianMs.
	GBPerS float64 `json:"gb_per_s"`
	// CopyGBPerS is the measured device-to-device copy bandwidth (bytes read
	// plus written), and CopyFraction GBPerS over it.
	CopyGBPerS   float64 `json:"copy_gb_per_s"`
	CopyFraction float64 `json:"copy_fraction"`
	// TorchEagerMs and TorchCompileMs are torch's times for the same step
	// on the same device (TorchTimes), and XEager, XCompile their ratios to
	// MedianMs (> 1: rftpipe is faster); absent without torch.
	TorchEagerMs   float64 `json:"torch_eager_ms,omitempty"`
	TorchCompileMs float64 `json:"torch_compile_ms,omitempty"`
	XEager         float64 `json:"x_eager,omitempty"`
	XCompile       float64 `json:"x_compile,omitempty"`
}

// WithTorch adds torch's eager and compiled times and the ratios.
func (r *BenchResult) WithTorch(eagerMs, compileMs float64) {
	r.TorchEagerMs, r.TorchCompileMs = eagerMs, compileMs
	r.XEager, r.XCompile = eagerMs/r.MedianMs, compileMs/r.MedianMs
}

// BenchLoss times o on tokens.Synthetic(rows, width, seed) with
// objective.Bench: the median kernel time (one warm-up evaluation compiles
// the kernels) with its throughput and its bandwidth against copyGBPerS
// (from CopyBandwidth; 0 leaves the fraction out).
func (d *Device) BenchLoss(o *objective.Objective, rows, width, runs int, seed uint64, copyGBPerS float64) (BenchResult, error) {
	ev := d.NewEvaluator(Options{Timing: true})
	defer ev.Close()
	var bytes int64
	med, err := objective.Bench(ev, o, rows, width, runs, seed, func(eval func() error) (float64, error) {
		if err := eval(); err != nil {
			return 0, err
		}
		ms, n := ev.TakeTiming()
		bytes = n
		return ms, nil
	})
	if err != nil {
		return BenchResult{}, err
	}
	r := BenchResult{Fn: o.Policy.Name(), Shape: fmt.Sprintf("%dx%d", rows, width), Device: d.String(), MedianMs: med,
		MtokPerS: float64(rows*width) / med / 1e3, GBPerS: float64(bytes) / med / 1e6, CopyGBPerS: copyGBPerS}
	if copyGBPerS > 0 {
		r.CopyFraction = r.GBPerS / copyGBPerS
	}
	return r, nil
}

// CopyBandwidth measures the device-to-device copy bandwidth in GB/s
// (bytes read plus bytes written): the median of 20 event-timed copies of
// a buffer of n bytes, after one warm-up copy.
func (d *Device) CopyBandwidth(n int) (float64, error) {
	var gbps float64
	err := d.locked(func() error {
		drv := d.drv
		src, err := drv.alloc(n)
		if err != nil {
			return err
		}
		defer func() { _ = drv.free(src) }()
		dst, err := drv.alloc(n)
		if err != nil {
			return err
		}
		defer func() { _ = drv.free(dst) }()
		var start, stop uintptr
		for _, ev := range []*uintptr{&start, &stop} {
			if err := drv.call("cuEventCreate", drv.eventCreate, uintptr(unsafe.Pointer(ev)), eventDefault); err != nil {
				return err
			}
			defer func(ev uintptr) { _ = drv.call("cuEventDestroy", drv.eventDestroy, ev) }(*ev)
		}
		if err := drv.memset(src, 0x5a, n, 0); err != nil {
			return err
		}
		var times []float64
		for i := 0; i <= 20; i++ {
			if err := drv.call("cuEventRecord", drv.eventRecord, start, 0); err != nil {
				return err
			}
			if err := drv.dtod(dst, src, n, 0); err != nil {
				return err
			}
			if err := drv.call("cuEventRecord", drv.eventRecord, stop, 0); err != nil {
				return err
			}
			if err := drv.call("cuEventSynchronize", drv.eventSynchronize, stop); err != nil {
				return err
			}
			var ms float32
			if err := drv.call("cuEventElapsedTime", drv.eventElapsedTime, uintptr(unsafe.Pointer(&ms)), start, stop); err != nil {
				return err
			}
			if i > 0 {
				times = append(times, float64(ms))
			}
		}
		slices.Sort(times)
		gbps = 2 * float64(n) / times[len(times)/2] / 1e6
		return nil
	})
	return gbps, err
}
