package cuda

import (
	"bytes"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
)

// nvrtcSpec is where libnvrtc is looked for: the CUDA 13, 12 and 11.2+ sonames
// (NVRTC 11.2 to 11.8 all use libnvrtc.so.11.2; Debian's libnvrtc11.2 is
// 11.8), the toolkit folders, and the layout of NVIDIA's pip wheels
// (nvidia-cuda-nvrtc-cu12 puts it in nvidia/cuda_nvrtc/lib, the CUDA 13
// wheels in nvidia/cu13/lib).
var nvrtcSpec = libSpec{
	envVar:  "DQNFLOW_NVRTC",
	sonames: []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"},
	dirs: []string{
		"/usr/local/cuda/lib64",
		"/usr/local/cuda-*/lib64",
		"/usr/local/cuda/targets/*/lib",
		"/usr/lib/x86_64-linux-gnu",
		"/usr/lib/aarch64-linux-gnu",
		"/usr/local/lib/python3*/dist-packages/nvidia/cu13/lib",
		"/usr/local/lib/python3*/dist-packages/nvidia/cuda_nvrtc/lib",
		"/usr/local/lib/python3*/site-packages/nvidia/cu13/lib",
		"/usr/local/lib/python3*/site-packages/nvidia/cuda_nvrtc/lib",
		"/usr/lib/python3/dist-packages/nvidia/cu13/lib",
		"/usr/lib/python3/dist-packages/nvidia/cuda_nvrtc/lib",
		"/opt/conda/lib/python3*/site-packages/nvidia/cu13/lib",
		"/opt/conda/lib/python3*/site-packages/nvidia/cuda_nvrtc/lib",
		"/root/.local/lib/python3*/site-packages/nvidia/cu13/lib",
		"/root/.local/lib/python3*/site-packages/nvidia/cuda_nvrtc/lib",
	},
	hint: "install NVRTC (Debian: libnvrtc11.2 from non-free; NVIDIA: cuda-nvrtc or the nvidia-cuda-nvrtc pip wheel), or set DQNFLOW_NVRTC to the path of libnvrtc.so",
}

// nvrtcAPI holds the NVRTC functions this package calls; nvrtcResult is a C
// enum (int32), nvrtcProgram a pointer.
type nvrtcAPI struct {
	lib *library

	nvrtcVersion           func(major, minor *int32) int32
	nvrtcGetErrorString    func(code int32) string
	nvrtcCreateProgram     func(prog *uintptr, src, name string, numHeaders int32, headers, includeNames **byte) int32
	nvrtcCompileProgram    func(prog uintptr, numOptions int32, options **byte) int32
	nvrtcGetProgramLogSize func(prog uintptr, n *uintptr) int32
	nvrtcGetProgramLog     func(prog uintptr, log *byte) int32
	nvrtcGetCUBINSize      func(prog uintptr, n *uintptr) int32
	nvrtcGetCUBIN          func(prog uintptr, cubin *byte) int32
	nvrtcDestroyProgram    func(prog *uintptr) int32
}

func (a *nvrtcAPI) symbols() []symbol {
	req := func(fptr any, name string) symbol { return symbol{names: []string{name}, fptr: fptr} }
	return []symbol{
		req(&a.nvrtcVersion, "nvrtcVersion"),
		req(&a.nvrtcGetErrorString, "nvrtcGetErrorString"),
		req(&a.nvrtcCreateProgram, "nvrtcCreateProgram"),
		req(&a.nvrtcCompileProgram, "nvrtcCompileProgram"),
		req(&a.nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize"),
		req(&a.nvrtcGetProgramLog, "nvrtcGetProgramLog"),
		req(&a.nvrtcGetCUBINSize, "nvrtcGetCUBINSize"),
		req(&a.nvrtcGetCUBIN, "nvrtcGetCUBIN"),
		req(&a.nvrtcDestroyProgram, "nvrtcDestroyProgram"),
	}
}

var nvrtcOnce loaded[nvrtcAPI]

func loadNVRTC() (*nvrtcAPI, error) {
	return nvrtcOnce.load(nvrtcSpec, ErrNoNVRTC, "NVRTC older than 11.1 has no CUBIN output; install NVRTC 11.8 or newer",
		func(lib *library) (*nvrtcAPI, []symbol) {
			a := &nvrtcAPI{lib: lib}
			return a, a.symbols()
		})
}

func (a *nvrtcAPI) check(call string, r int32) error {
	if r == 0 {
		return nil
	}
	name := a.nvrtcGetErrorString(r)
	if name == "" {
		name = "nvrtcResult(" + strconv.Itoa(int(r)) + ")"
	}
	return &Error{Call: call, Code: int(r), Name: name}
}

// Compiler compiles CUDA C++ to CUBIN with NVRTC. It needs no GPU. It is safe
// for concurrent use (NVRTC allows concurrent programs).
type Compiler struct {
	api          *nvrtcAPI
	major, minor int

	compiles atomic.Int64 // NVRTC compilations run, for the cache tests
}

// NewCompiler opens NVRTC; the error wraps ErrNoNVRTC when it is missing.
func NewCompiler() (*Compiler, error) {
	a, err := loadNVRTC()
	if err != nil {
		return nil, err
	}
	var major, minor int32
	if err := a.check("nvrtcVersion", a.nvrtcVersion(&major, &minor)); err != nil {
		return nil, err
	}
	return &Compiler{api: a, major: int(major), minor: int(minor)}, nil
}

// Version returns NVRTC's version, e.g. 13, 0.
func (c *Compiler) Version() (major, minor int, err error) {
	if c == nil || c.api == nil {
		return 0, 0, fmt.Errorf("%w: nil Compiler", ErrNoNVRTC)
	}
	return c.major, c.minor, nil
}

// Path returns the file NVRTC was loaded from.
func (c *Compiler) Path() string {
	if c == nil || c.api == nil {
		return ""
	}
	return c.api.lib.path
}

// Compile compiles src (named name in messages, e.g. "adam.cu") for the real
// architecture sm_<arch> (90 for H100/H200) and returns the CUBIN and
// NVRTC's log (warnings, possibly empty). An option "--gpu-architecture=..."
// or "-arch=..." in opts replaces the one built from arch (NVRTC refuses
// two), for targets an int cannot name such as sm_90a (wgmma, CUDA 12+). On a compile error, err contains
// the log, whose lines read "name(line): error: ...". Kernels must not include
// toolkit headers (DESIGN.md §5).
func (c *Compiler) Compile(src, name string, arch int, opts ...string) (cubin []byte, log string, err error) {
	if c == nil || c.api == nil {
		return nil, "", fmt.Errorf("%w: nil Compiler", ErrNoNVRTC)
	}
	if name == "" {
		name = "kernel.cu"
	}
	if arch < 10 || arch > 999 {
		return nil, "", fmt.Errorf("nvrtc: compile %s: architecture %d is not an sm_ number such as 90", name, arch)
	}
	if strings.IndexByte(src, 0) >= 0 {
		return nil, "", fmt.Errorf("nvrtc: compile %s: source contains a NUL byte", name)
	}
	c.compiles.Add(1)
	a := c.api
	var prog uintptr
	if err := a.check("nvrtcCreateProgram", a.nvrtcCreateProgram(&prog, src, name, 0, nil, nil)); err != nil {
		return nil, "", fmt.Errorf("nvrtc: compile %s: %w", name, err)
	}
	defer a.nvrtcDestroyProgram(&prog)

	all := opts
	if !slices.ContainsFunc(opts, isArchOption) {
		all = append([]string{"--gpu-architecture=sm_" + strconv.Itoa(arch)}, opts...)
	}
	cstrs := make([][]byte, len(all))
	ptrs := make([]*byte, len(all))
	for i, o := range all {
		if strings.IndexByte(o, 0) >= 0 {
			return nil, "", fmt.Errorf("nvrtc: compile %s: option %d contains a NUL byte", name, i)
		}
		cstrs[i] = append([]byte(o), 0)
		ptrs[i] = &cstrs[i][0]
	}
	compileErr := a.check("nvrtcCompileProgram", a.nvrtcCompileProgram(prog, int32(len(ptrs)), &ptrs[0]))
	runtime.KeepAlive(cstrs)
	runtime.KeepAlive(ptrs)

	log, logErr := c.programLog(prog)
	if compileErr != nil {
		if logErr != nil {
			log = "(no log: " + logErr.Error() + ")"
		}
		with := ""
		if len(opts) > 0 {
			with = fmt.Sprintf(" with %q", opts)
		}
		return nil, log, fmt.Errorf("nvrtc: compile %s for sm_%d%s: %w\n%s", name, arch, with, compileErr, log)
	}

	var n uintptr
	if err := a.check("nvrtcGetCUBINSize", a.nvrtcGetCUBINSize(prog, &n)); err != nil {
		return nil, log, fmt.Errorf("nvrtc: compile %s: %w", name, err)
	}
	if n == 0 {
		return nil, log, fmt.Errorf("nvrtc: compile %s for sm_%d: NVRTC produced no CUBIN", name, arch)
	}
	cubin = make([]byte, n)
	if err := a.check("nvrtcGetCUBIN", a.nvrtcGetCUBIN(prog, &cubin[0])); err != nil {
		return nil, log, fmt.Errorf("nvrtc: compile %s: %w", name, err)
	}
	if !bytes.HasPrefix(cubin, elfMagic) {
		return nil, log, fmt.Errorf("nvrtc: compile %s for sm_%d: NVRTC returned %d bytes that are not an ELF CUBIN", name, arch, n)
	}
	return cubin, log, nil
}

// isArchOption reports whether o chooses the target architecture.
func isArchOption(o string) bool {
	return strings.HasPrefix(o, "--gpu-architecture=") || strings.HasPrefix(o, "-arch=")
}

// programLog returns NVRTC's log for prog without the trailing NUL and space.
func (c *Compiler) programLog(prog uintptr) (string, error) {
	a := c.api
	var n uintptr
	if err := a.check("nvrtcGetProgramLogSize", a.nvrtcGetProgramLogSize(prog, &n)); err != nil {
		return "", err
	}
	if n <= 1 {
		return "", nil
	}
	buf := make([]byte, n)
	if err := a.check("nvrtcGetProgramLog", a.nvrtcGetProgramLog(prog, &buf[0])); err != nil {
		return "", err
	}
	if i := bytes.IndexByte(buf, 0); i >= 0 {
		buf = buf[:i]
	}
	return strings.TrimRight(string(buf), " \t\r\n"), nil
}
