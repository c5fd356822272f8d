package gpu

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unsafe"
)

// Device is CUDA device 0 of this process, with a primary context and, once
// the first evaluation asks for them, the loss kernels compiled by NVRTC for
// its architecture. Open returns the one Device of the process; its methods
// are safe for concurrent use (evaluations are serialised).
type Device struct {
	drv  *driver
	nv   *nvrtc
	dev  int32
	ctx  uintptr
	name string
	arch int // compute capability × 10, e.g. 90
	sms  int

	mu      sync.Mutex // serialises use of the context, streams and buffers
	modOnce sync.Once
	modErr  error
	fns     map[string]uintptr
}

var (
	probeOnce sync.Once
	probed    *Device
	probeErr  error
)

// Open initialises the driver and returns device 0; the result (device or
// error) is cached for the process. It fails when libcuda.so.1 or NVRTC
// cannot be loaded, cuInit fails or no device is present.
func Open() (*Device, error) {
	probeOnce.Do(func() { probed, probeErr = open() })
	return probed, probeErr
}

// Available reports whether a CUDA driver, NVRTC and a device answer; the
// reason names the device, or says why not.
func Available() (ok bool, reason string) {
	d, err := Open()
	if err != nil {
		return false, err.Error()
	}
	return true, d.String()
}

func open() (*Device, error) { return openFrom(driverCandidates(), nvrtcCandidates()) }

// openFrom opens device 0 with the first driver and NVRTC libraries of the
// candidate lists that load.
func openFrom(driverLibs, nvrtcLibs []string) (*Device, error) {
	drv, err := loadDriver(driverLibs)
	if err != nil {
		return nil, err
	}
	if err := drv.call("cuInit", drv.init, 0); err != nil {
		return nil, err
	}
	var n int32
	if err := drv.call("cuDeviceGetCount", drv.deviceGetCount, uintptr(unsafe.Pointer(&n))); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, errors.New("the CUDA driver reports 0 devices")
	}
	nv, err := loadNVRTC(nvrtcLibs)
	if err != nil {
		return nil, err
	}
	d := &Device{drv: drv, nv: nv}
	if err := drv.call("cuDeviceGet", drv.deviceGet, uintptr(unsafe.Pointer(&d.dev)), 0); err != nil {
		return nil, err
	}
	name := make([]byte, 256)
	if err := drv.call("cuDeviceGetName", drv.deviceGetName, uintptr(unsafe.Pointer(&name[0])), uintptr(len(name)), uintptr(d.dev)); err != nil {
		return nil, err
	}
	d.name = strings.TrimRight(string(name), "\x00")
	var major, minor, sms int32
	for _, a := range []struct {
		attr int
		dst  *int32
	}{{attrComputeCapMajor, &major}, {attrComputeCapMinor, &minor}, {attrMultiprocessorCount, &sms}} {
		if err := drv.call("cuDeviceGetAttribute", drv.deviceGetAttribute, uintptr(unsafe.Pointer(a.dst)), uintptr(a.attr), uintptr(d.dev)); err != nil {
			return nil, err
		}
	}
	d.arch, d.sms = int(major*10+minor), int(sms)
	if err := drv.call("cuDevicePrimaryCtxRetain", drv.primaryCtxRetain, uintptr(unsafe.Pointer(&d.ctx)), uintptr(d.dev)); err != nil {
		return nil, err
	}
	return d, nil
}

// String names the device: "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs)".
func (d *Device) String() string { return fmt.Sprintf("%s (sm_%d, %d SMs)", d.name, d.arch, d.sms) }

// Name returns the device's name as the driver reports it.
func (d *Device) Name() string { return d.name }

// NVRTCPath returns the NVRTC library in use.
func (d *Device) NVRTCPath() string { return d.nv.lib.path }

// locked runs f with the device's context current on a locked OS thread and
// the device mutex held (a CUDA context is current per thread).
func (d *Device) locked(f func() error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := d.drv.call("cuCtxSetCurrent", d.drv.ctxSetCurrent, d.ctx); err != nil {
		return err
	}
	return f()
}

// kernelNames are the entry points of rft_loss.cu.
func kernelNames() []string {
	names := []string{"rft_finish", "rft_zero_rows_f32", "rft_zero_rows_f64"}
	for k := 0; k < int(numKinds); k++ {
		names = append(names, rowsKernel(int32(k), false), rowsKernel(int32(k), true))
	}
	return names
}

// rowsKernel is the entry point of kernel kind k for the storage type.
func rowsKernel(k int32, f64 bool) string {
	if f64 {
		return fmt.Sprintf("rft_rows_k%d_f64", k)
	}
	return fmt.Sprintf("rft_rows_k%d_f32", k)
}

// module compiles the kernels with NVRTC for the device's architecture and
// loads them, once per process. Called with the context current.
func (d *Device) module() error {
	d.modOnce.Do(func() {
		cubin, err := d.nv.compile(source{"rft_loss.cu", kernelSource}, []source{{"rft_loss.h", kernelHeader}}, d.arch,
			[]string{"--std=c++17", "--fmad=false", "-default-device"})
		if err != nil {
			d.modErr = fmt.Errorf("compiling the loss kernels for sm_%d with %s: %w", d.arch, d.nv.lib.path, err)
			return
		}
		var mod uintptr
		if err := d.drv.call("cuModuleLoadData", d.drv.moduleLoadData, uintptr(unsafe.Pointer(&mod)), uintptr(unsafe.Pointer(&cubin[0]))); err != nil {
			d.modErr = err
			return
		}
		d.fns = map[string]uintptr{}
		for _, name := range kernelNames() {
			var fn uintptr
			if err := d.drv.call("cuModuleGetFunction", d.drv.moduleGetFunction, uintptr(unsafe.Pointer(&fn)), mod, uintptr(unsafe.Pointer(cString(name)))); err != nil {
				d.modErr = fmt.Errorf("%w (%s)", err, name)
				return
			}
			d.fns[name] = fn
		}
	})
	return d.modErr
}
