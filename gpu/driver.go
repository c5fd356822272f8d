package gpu

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Error is a failed CUDA driver or NVRTC call: the call's name and the
// library's name of the result code, e.g. "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY".
type Error struct {
	Call string // API function, without its _v2 suffix
	Code int    // CUresult or nvrtcResult
	Name string // symbolic name of Code
	Log  string // NVRTC compilation log, when there is one
}

func (e *Error) Error() string {
	s := e.Call + ": " + e.Name
	if e.Log != "" {
		s += "\n" + e.Log
	}
	return s
}

// Driver API constants used here (cuda.h).
const (
	attrMultiprocessorCount = 16
	attrComputeCapMajor     = 75
	attrComputeCapMinor     = 76
	eventDefault            = 0
	streamNonBlocking       = 1
)

// cuErrNames names the CUresult codes this package is likely to meet, for
// when cuGetErrorName itself is unavailable.
var cuErrNames = map[int]string{
	1: "CUDA_ERROR_INVALID_VALUE", 2: "CUDA_ERROR_OUT_OF_MEMORY", 3: "CUDA_ERROR_NOT_INITIALIZED",
	4: "CUDA_ERROR_DEINITIALIZED", 100: "CUDA_ERROR_NO_DEVICE", 101: "CUDA_ERROR_INVALID_DEVICE",
	200: "CUDA_ERROR_INVALID_IMAGE", 209: "CUDA_ERROR_NO_BINARY_FOR_GPU", 218: "CUDA_ERROR_INVALID_PTX",
	222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", 700: "CUDA_ERROR_ILLEGAL_ADDRESS",
	701: "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", 719: "CUDA_ERROR_LAUNCH_FAILED", 999: "CUDA_ERROR_UNKNOWN",
}

// driver holds the entry points of libcuda used by this package.
type driver struct {
	lib *library

	init, driverGetVersion, deviceGetCount, deviceGet, deviceGetName, deviceGetAttribute uintptr
	primaryCtxRetain, ctxSetCurrent, moduleLoadData, moduleGetFunction                   uintptr
	memAlloc, memFree, memAllocHost, memFreeHost                                         uintptr
	memcpyHtoDAsync, memcpyDtoHAsync, memcpyDtoDAsync, memsetD8Async                     uintptr
	launchKernel, streamCreate, streamSynchronize, streamDestroy                         uintptr
	eventCreate, eventRecord, eventSynchronize, eventElapsedTime, eventDestroy           uintptr
	getErrorName                                                                         uintptr
}

// loadDriver dlopens the first CUDA driver library of candidates that loads
// and resolves every entry point.
func loadDriver(candidates []string) (*driver, error) {
	lib, err := openFirst("CUDA driver (libcuda.so.1)", candidates)
	if err != nil {
		return nil, err
	}
	d := &driver{lib: lib}
	err = lib.syms(map[string]*uintptr{
		"cuInit": &d.init, "cuDriverGetVersion": &d.driverGetVersion,
		"cuDeviceGetCount": &d.deviceGetCount, "cuDeviceGet": &d.deviceGet,
		"cuDeviceGetName": &d.deviceGetName, "cuDeviceGetAttribute": &d.deviceGetAttribute,
		"cuDevicePrimaryCtxRetain": &d.primaryCtxRetain, "cuCtxSetCurrent": &d.ctxSetCurrent,
		"cuModuleLoadData": &d.moduleLoadData, "cuModuleGetFunction": &d.moduleGetFunction,
		"cuMemAlloc_v2": &d.memAlloc, "cuMemFree_v2": &d.memFree,
		"cuMemAllocHost_v2": &d.memAllocHost, "cuMemFreeHost": &d.memFreeHost,
		"cuMemcpyHtoDAsync_v2": &d.memcpyHtoDAsync, "cuMemcpyDtoHAsync_v2": &d.memcpyDtoHAsync,
		"cuMemcpyDtoDAsync_v2": &d.memcpyDtoDAsync, "cuMemsetD8Async": &d.memsetD8Async,
		"cuLaunchKernel": &d.launchKernel, "cuStreamCreate": &d.streamCreate,
		"cuStreamSynchronize": &d.streamSynchronize, "cuStreamDestroy_v2": &d.streamDestroy,
		"cuEventCreate": &d.eventCreate, "cuEventRecord": &d.eventRecord,
		"cuEventSynchronize": &d.eventSynchronize, "cuEventElapsedTime": &d.eventElapsedTime,
		"cuEventDestroy_v2": &d.eventDestroy, "cuGetErrorName": &d.getErrorName,
	})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// call invokes a driver entry point and turns a non-zero CUresult into an
// *Error naming the call. Pointer arguments are converted to uintptr in the
// caller's argument list, which keeps their targets alive and in place for
// the duration of the call.
//
//go:uintptrescapes
func (d *driver) call(name string, fn uintptr, args ...uintptr) error {
	r, _, _ := purego.SyscallN(fn, args...)
	if rc := int(int32(r)); rc != 0 {
		return &Error{Call: name, Code: rc, Name: d.errName(rc)}
	}
	return nil
}

// errName returns the CUresult's symbolic name.
func (d *driver) errName(rc int) string {
	var p uintptr
	r, _, _ := purego.SyscallN(d.getErrorName, uintptr(rc), uintptr(unsafe.Pointer(&p)))
	if r == 0 && p != 0 {
		return goString(p)
	}
	if n, ok := cuErrNames[rc]; ok {
		return n
	}
	return fmt.Sprintf("CUresult %d", rc)
}

// devPtr is a device address (CUdeviceptr).
type devPtr uint64

func (d *driver) alloc(n int) (devPtr, error) {
	var p devPtr
	if n == 0 {
		n = 1
	}
	err := d.call("cuMemAlloc", d.memAlloc, uintptr(unsafe.Pointer(&p)), uintptr(n))
	return p, err
}

func (d *driver) free(p devPtr) error {
	if p == 0 {
		return nil
	}
	return d.call("cuMemFree", d.memFree, uintptr(p))
}

// allocHost returns n bytes of page-locked host memory (for asynchronous
// copies at full bus speed). The memory is outside the Go heap.
func (d *driver) allocHost(n int) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	if n == 0 {
		n = 1
	}
	err := d.call("cuMemAllocHost", d.memAllocHost, uintptr(unsafe.Pointer(&p)), uintptr(n))
	return p, err
}

func (d *driver) freeHost(p unsafe.Pointer) error {
	if p == nil {
		return nil
	}
	return d.call("cuMemFreeHost", d.memFreeHost, uintptr(p))
}

func (d *driver) htod(dst devPtr, src unsafe.Pointer, n int, stream uintptr) error {
	if n == 0 {
		return nil
	}
	return d.call("cuMemcpyHtoDAsync", d.memcpyHtoDAsync, uintptr(dst), uintptr(src), uintptr(n), stream)
}

func (d *driver) dtoh(dst unsafe.Pointer, src devPtr, n int, stream uintptr) error {
	if n == 0 {
		return nil
	}
	return d.call("cuMemcpyDtoHAsync", d.memcpyDtoHAsync, uintptr(dst), uintptr(src), uintptr(n), stream)
}

func (d *driver) dtod(dst, src devPtr, n int, stream uintptr) error {
	return d.call("cuMemcpyDtoDAsync", d.memcpyDtoDAsync, uintptr(dst), uintptr(src), uintptr(n), stream)
}

func (d *driver) memset(dst devPtr, v byte, n int, stream uintptr) error {
	return d.call("cuMemsetD8Async", d.memsetD8Async, uintptr(dst), uintptr(v), uintptr(n), stream)
}

func (d *driver) sync(stream uintptr) error {
	return d.call("cuStreamSynchronize", d.streamSynchronize, stream)
}

// launch runs fn on a 1-D grid. params holds the kernel's arguments in
// order, each a pointer to its value (cuLaunchKernel's kernelParams); the
// values and the array are pinned for the call, as Go's rules for passing
// memory that holds Go pointers to C require.
func (d *driver) launch(fn uintptr, grid, block, shared int, stream uintptr, params []unsafe.Pointer) error {
	var pin runtime.Pinner
	defer pin.Unpin()
	for _, p := range params {
		pin.Pin(p)
	}
	pin.Pin(&params[0])
	return d.call("cuLaunchKernel", d.launchKernel, fn,
		uintptr(grid), 1, 1, uintptr(block), 1, 1, uintptr(shared), stream,
		uintptr(unsafe.Pointer(&params[0])), 0)
}
