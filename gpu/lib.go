package gpu

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

// library is a dlopen'ed shared library.
type library struct {
	path   string
	handle uintptr
}

// openFirst dlopens the first candidate that loads; the error gives the
// first candidate's dlerror text and how many others failed.
func openFirst(what string, candidates []string) (*library, error) {
	var first error
	for _, c := range candidates {
		h, err := purego.Dlopen(c, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err == nil {
			return &library{path: c, handle: h}, nil
		}
		if first == nil {
			first = err
		}
	}
	return nil, fmt.Errorf("%s not found (%v; %d other paths tried)", what, first, len(candidates)-1)
}

// sym resolves a symbol; a missing one is an error naming the library.
func (l *library) sym(name string) (uintptr, error) {
	p, err := purego.Dlsym(l.handle, name)
	if err != nil || p == 0 {
		return 0, fmt.Errorf("%s: symbol %s not found", l.path, name)
	}
	return p, nil
}

// syms resolves every name into the matching pointer of dst.
func (l *library) syms(dst map[string]*uintptr) error {
	for name, p := range dst {
		v, err := l.sym(name)
		if err != nil {
			return err
		}
		*p = v
	}
	return nil
}

// driverCandidates are the names of the CUDA driver library: $RFTPIPE_CUDA
// (an explicit file) when set, then the soname (what the loader path and
// ldconfig know), then explicit paths.
func driverCandidates() []string {
	var out []string
	if p := os.Getenv("RFTPIPE_CUDA"); p != "" {
		out = append(out, p)
	}
	return append(out,
		"libcuda.so.1",
		"/usr/lib/x86_64-linux-gnu/libcuda.so.1",
		"/usr/lib64/libcuda.so.1",
		"/usr/local/nvidia/lib64/libcuda.so.1",
		"/usr/lib/wsl/lib/libcuda.so.1",
	)
}

// nvrtcCandidates are the NVRTC libraries to try, in order: $RFTPIPE_NVRTC
// (an explicit file), the sonames the loader knows, then every libnvrtc.so*
// under $CUDA_HOME, $CUDA_PATH, /usr/local/cuda*, /opt/cuda and the NVRTC
// wheels of Python environments (nvidia-cuda-nvrtc, as PyTorch installs it),
// newest version first within each directory.
func nvrtcCandidates() []string {
	var out []string
	if p := os.Getenv("RFTPIPE_NVRTC"); p != "" {
		out = append(out, p)
	}
	out = append(out, "libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2")
	var dirs []string
	for _, env := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if h := os.Getenv(env); h != "" {
			dirs = append(dirs, filepath.Join(h, "lib64"), filepath.Join(h, "lib"),
				filepath.Join(h, "targets", "x86_64-linux", "lib"), filepath.Join(h, "targets", "sbsa-linux", "lib"))
		}
	}
	for _, pat := range []string{
		"/usr/local/cuda/lib64", "/usr/local/cuda/targets/*/lib", "/usr/local/cuda-*/lib64",
		"/opt/cuda/lib64", "/usr/lib/x86_64-linux-gnu", "/usr/lib64",
		"/opt/*/.venv/lib/python3*/site-packages/nvidia/*/lib",
		"/usr/local/lib/python3*/dist-packages/nvidia/*/lib",
		"/usr/lib/python3/dist-packages/nvidia/*/lib",
	} {
		m, _ := filepath.Glob(pat)
		dirs = append(dirs, m...)
	}
	seen := map[string]bool{}
	for _, d := range dirs {
		m, _ := filepath.Glob(filepath.Join(d, "libnvrtc.so*"))
		// libnvrtc-builtins is a helper NVRTC loads itself; skip it.
		var libs []string
		for _, f := range m {
			if !strings.Contains(filepath.Base(f), "builtins") && !seen[f] {
				seen[f] = true
				libs = append(libs, f)
			}
		}
		sort.Sort(sort.Reverse(sort.StringSlice(libs)))
		out = append(out, libs...)
	}
	return out
}

// cString returns a NUL-terminated copy of s on the Go heap.
func cString(s string) *byte {
	b := make([]byte, len(s)+1)
	copy(b, s)
	return &b[0]
}

// goString copies the NUL-terminated C string at p.
func goString(p uintptr) string {
	if p == 0 {
		return ""
	}
	var b []byte
	for i := uintptr(0); ; i++ {
		c := *(*byte)(unsafe.Add(unsafe.Pointer(nil), p+i)) // C memory
		if c == 0 {
			return string(b)
		}
		b = append(b, c)
	}
}
