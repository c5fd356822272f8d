package gpu

import (
	"slices"
	"unsafe"

	"github.com/rftpipe/rftpipe/stages/objective"
)

// BenchLoss times o on tokens.Synthetic(rows, width, seed) with
// objective.Bench: the median kernel time (one warm-up evaluation compiles
// the kernels) with its throughput and its bandwidth against copyGBPerS
// (from CopyBandwidth; 0 leaves the fraction out).
func (d *Device) BenchLoss(o *objective.Objective, rows, width, runs int, seed uint64, copyGBPerS float64) (objective.BenchResult, error) {
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
		return objective.BenchResult{}, err
	}
	return objective.NewBenchResult(o, d.String(), rows, width, med, bytes, copyGBPerS), nil
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
