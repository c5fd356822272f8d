package gpu

import (
	"fmt"
	"runtime"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

// nvrtc holds the entry points of the NVRTC run-time compiler.
type nvrtc struct {
	lib *library

	version, createProgram, compileProgram, destroyProgram   uintptr
	getProgramLogSize, getProgramLog, getCUBINSize, getCUBIN uintptr
	getErrorString                                           uintptr
}

// loadNVRTC dlopens the first NVRTC library of candidates that loads
// (see nvrtcCandidates).
func loadNVRTC(candidates []string) (*nvrtc, error) {
	lib, err := openFirst("NVRTC (libnvrtc.so; set CUDA_HOME or RFTPIPE_NVRTC)", candidates)
	if err != nil {
		return nil, err
	}
	n := &nvrtc{lib: lib}
	err = lib.syms(map[string]*uintptr{
		"nvrtcVersion": &n.version, "nvrtcCreateProgram": &n.createProgram,
		"nvrtcCompileProgram": &n.compileProgram, "nvrtcDestroyProgram": &n.destroyProgram,
		"nvrtcGetProgramLogSize": &n.getProgramLogSize, "nvrtcGetProgramLog": &n.getProgramLog,
		"nvrtcGetCUBINSize": &n.getCUBINSize, "nvrtcGetCUBIN": &n.getCUBIN,
		"nvrtcGetErrorString": &n.getErrorString,
	})
	if err != nil {
		return nil, err
	}
	return n, nil
}

// call invokes an NVRTC function; a non-zero nvrtcResult becomes an *Error.
//
//go:uintptrescapes
func (n *nvrtc) call(name string, fn uintptr, args ...uintptr) error {
	r, _, _ := purego.SyscallN(fn, args...)
	if rc := int(int32(r)); rc != 0 {
		s, _, _ := purego.SyscallN(n.getErrorString, uintptr(rc))
		return &Error{Call: name, Code: rc, Name: goString(s)}
	}
	return nil
}

// Version returns NVRTC's version as "major.minor".
func (n *nvrtc) Version() (string, error) {
	var major, minor int32
	if err := n.call("nvrtcVersion", n.version, uintptr(unsafe.Pointer(&major)), uintptr(unsafe.Pointer(&minor))); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d.%d", major, minor), nil
}

// source is one CUDA C++ file handed to NVRTC.
type source struct {
	name, text string
}

// compile builds main (which may #include the headers by name) into a
// CUBIN for the real architecture sm_<arch>. A compilation error carries
// NVRTC's log.
func (n *nvrtc) compile(main source, headers []source, arch int, opts []string) ([]byte, error) {
	var pin runtime.Pinner
	defer pin.Unpin()
	cstrs := func(ss []string) unsafe.Pointer {
		if len(ss) == 0 {
			return nil
		}
		ptrs := make([]*byte, len(ss))
		for i, s := range ss {
			ptrs[i] = cString(s)
			pin.Pin(ptrs[i])
		}
		pin.Pin(&ptrs[0])
		return unsafe.Pointer(&ptrs[0])
	}
	var hdrText, hdrName []string
	for _, h := range headers {
		hdrText = append(hdrText, h.text)
		hdrName = append(hdrName, h.name)
	}
	var prog uintptr
	err := n.call("nvrtcCreateProgram", n.createProgram, uintptr(unsafe.Pointer(&prog)),
		uintptr(unsafe.Pointer(cString(main.text))), uintptr(unsafe.Pointer(cString(main.name))),
		uintptr(len(headers)), uintptr(cstrs(hdrText)), uintptr(cstrs(hdrName)))
	if err != nil {
		return nil, err
	}
	defer func() { _ = n.call("nvrtcDestroyProgram", n.destroyProgram, uintptr(unsafe.Pointer(&prog))) }()
	all := append([]string{fmt.Sprintf("--gpu-architecture=sm_%d", arch)}, opts...)
	if err := n.call("nvrtcCompileProgram", n.compileProgram, prog, uintptr(len(all)), uintptr(cstrs(all))); err != nil {
		if e, ok := err.(*Error); ok {
			e.Log = n.log(prog)
		}
		return nil, err
	}
	var size uintptr
	if err := n.call("nvrtcGetCUBINSize", n.getCUBINSize, prog, uintptr(unsafe.Pointer(&size))); err != nil {
		return nil, err
	}
	cubin := make([]byte, size)
	if err := n.call("nvrtcGetCUBIN", n.getCUBIN, prog, uintptr(unsafe.Pointer(&cubin[0]))); err != nil {
		return nil, err
	}
	return cubin, nil
}

// log returns the program's compilation log (empty if unavailable).
func (n *nvrtc) log(prog uintptr) string {
	var size uintptr
	if n.call("nvrtcGetProgramLogSize", n.getProgramLogSize, prog, uintptr(unsafe.Pointer(&size))) != nil || size <= 1 {
		return ""
	}
	b := make([]byte, size)
	if n.call("nvrtcGetProgramLog", n.getProgramLog, prog, uintptr(unsafe.Pointer(&b[0]))) != nil {
		return ""
	}
	return strings.TrimRight(string(b), "\x00\n")
}
