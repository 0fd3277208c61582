package gpu

import (
	"fmt"
	"sync"

	"github.com/dqnflow/dqnflow/gpu/cuda"
)

// kernels is the loaded module of one storage mode on one device, with every
// kernel resolved once.
type kernels struct {
	mod   *cuda.Module
	fn    map[string]cuda.Function
	wgmma bool // the forward GEMMs can run on wgmma (wgmmaKernelNames)
}

// moduleKey names a compiled module: storage mode, whether fp32 runs
// 3xTF32, whether it has the wgmma GEMMs, and the model sizes compiled in.
type moduleKey struct {
	bf16, tf32, wgmma   bool
	atoms, t1, t2, head int
}

// gpuDevice is one opened CUDA device with its compiled modules, shared by
// every trainer of the process on that device.
type gpuDevice struct {
	dev      *cuda.Device
	info     cuda.DeviceInfo
	compiler *cuda.Compiler
	mu       sync.Mutex
	mods     map[moduleKey]*kernels
	checks   map[moduleKey]string // precision self-check result per module
	hasEx    bool                 // the driver has cuLaunchKernelEx (dependentLaunches)
	nvrtc    int                  // NVRTC's major version (useWGMMA)
}

// setup is a Tuning resolved on one device: how the kernels of the
// trainer's graphs follow each other and whether the GEMMs have wgmma.
type setup struct {
	Tuning
	launch launchMode // dependentLaunches
	wgmma  gemmPath   // useWGMMA
}

// resolve checks tu and decides what it runs on d.
func (d *gpuDevice) resolve(tu Tuning) (setup, error) {
	if err := tu.Validate(); err != nil {
		return setup{}, err
	}
	s := setup{Tuning: tu}
	var err error
	if s.launch, err = dependentLaunches(d.info, d.hasEx, tu.PDL); err != nil {
		return setup{}, err
	}
	if s.wgmma, err = useWGMMA(d.info, d.nvrtc, tu.WGMMA); err != nil {
		return setup{}, err
	}
	return s, nil
}

// gemmPath says whether a device's bf16 and 3xTF32 fp32 modules compile
// the forward GEMMs for Hopper's warpgroup MMA, and why (useWGMMA).
type gemmPath struct {
	on   bool
	desc string
}

// launchMode is how the kernels of the trainer's CUDA graphs follow each
// other on a device (dependentLaunches).
type launchMode struct {
	dependent bool   // launched as programmatic dependents (cuda.Ctx.LaunchDependent)
	desc      string // which, and why (Trainer.Launches)
}

var (
	devicesMu sync.Mutex
	devices   = map[int]*gpuDevice{}
)

// openDevice opens CUDA device ordinal once per process.
func openDevice(ordinal int) (*gpuDevice, error) {
	devicesMu.Lock()
	defer devicesMu.Unlock()
	if d, ok := devices[ordinal]; ok {
		return d, nil
	}
	dev, err := cuda.Open(ordinal)
	if err != nil {
		return nil, err
	}
	comp, err := cuda.NewCompiler()
	if err != nil {
		dev.Close()
		return nil, fmt.Errorf("cuda:%d: kernels are compiled at start-up: %w", ordinal, err)
	}
	d := &gpuDevice{dev: dev, info: dev.Info(), compiler: comp, mods: map[moduleKey]*kernels{}, checks: map[moduleKey]string{}}
	if err := dev.Do(func(c *cuda.Ctx) error { d.hasEx = c.CanLaunchDependent(); return nil }); err != nil {
		dev.Close()
		return nil, err
	}
	if d.nvrtc, _, err = comp.Version(); err != nil {
		dev.Close()
		return nil, fmt.Errorf("cuda:%d: %w", ordinal, err)
	}
	devices[ordinal] = d
	return d, nil
}

// dependentLaunches decides how the kernels of the trainer's CUDA graphs
// follow each other on a device (ADR 0019). By default, on sm_90 and newer
// with a driver that has cuLaunchKernelEx, as programmatic dependents: the
// next kernel's launch is prepared while the one before runs and its
// blocks are scheduled as that kernel's blocks exit (kernels/common.cu
// pdlEnter). Measured on an H200 against launches one after the other in
// the same run: 0.103 against 0.107 ms a step at batch 256, no difference
// beyond the spread at 4096 and 16384. Elsewhere one after the other, and
// the description says why.
// setting is Tuning.PDL: "auto" (that choice), "on" (the same, but an
// error where it cannot be had) or "off" (one after the other, for
// comparisons).
func dependentLaunches(info cuda.DeviceInfo, driverHasEx bool, setting string) (launchMode, error) {
	why := ""
	switch {
	case info.Major < 9:
		why = fmt.Sprintf("sm_%d%d has no programmatic dependent launch (sm_90 and newer)", info.Major, info.Minor)
	case !driverHasEx:
		why = "the driver has no cuLaunchKernelEx (CUDA 11.8 or newer)"
	}
	switch setting {
	case "auto":
		if why != "" {
			return launchMode{desc: "serial: " + why}, nil
		}
		return launchMode{dependent: true, desc: "programmatic dependent"}, nil
	case "on":
		if why != "" {
			return launchMode{}, fmt.Errorf("gpu tuning pdl = on (DQNFLOW_PDL): %s", why)
		}
		return launchMode{dependent: true, desc: "programmatic dependent"}, nil
	case "off":
		return launchMode{desc: "serial: gpu tuning pdl = off (DQNFLOW_PDL)"}, nil
	}
	return launchMode{}, fieldErr("pdl", "%q: must be auto, on or off", setting)
}

// useWGMMA decides whether the bf16 and 3xTF32 fp32 modules of a device
// run the forward GEMMs (A and B k-contiguous, unsplit: job.wgmmaFits) on Hopper's
// warpgroup MMA, compiled for sm_90a (kernels/gemm.cu gemmWgmma). By
// default where it can be had: compute capability 9.0 and NVRTC 12 or
// newer (NVRTC 11.8 has no sm_90a); elsewhere those GEMMs run on mma.sync
// like the others, and the description says why. setting is
// Tuning.WGMMA: "auto" (that choice), "on" (an error where it cannot be
// had) or "off" (mma.sync, for comparisons).
func useWGMMA(info cuda.DeviceInfo, nvrtcMajor int, setting string) (gemmPath, error) {
	why := ""
	switch {
	case info.Major != 9 || info.Minor != 0:
		why = fmt.Sprintf("sm_%d%d has no wgmma (sm_90a only)", info.Major, info.Minor)
	case nvrtcMajor < 12:
		why = fmt.Sprintf("NVRTC %d has no sm_90a (NVRTC 12 or newer)", nvrtcMajor)
	}
	switch setting {
	case "auto", "on":
		if why == "" {
			return gemmPath{on: true, desc: "wgmma (sm_90a)"}, nil
		}
		if setting == "on" {
			return gemmPath{}, fmt.Errorf("gpu tuning wgmma = on (DQNFLOW_WGMMA): %s", why)
		}
		return gemmPath{desc: "mma.sync: " + why}, nil
	case "off":
		return gemmPath{desc: "mma.sync: gpu tuning wgmma = off (DQNFLOW_WGMMA)"}, nil
	}
	return gemmPath{}, fieldErr("wgmma", "%q: must be auto, on or off", setting)
}

// arch is the device's compute capability as NVRTC's sm_XY number.
func (d *gpuDevice) arch() int { return d.info.Major*10 + d.info.Minor }

// dynShared is a kernel that needs more than 48 KiB of dynamic shared
// memory, and how much (cuda.Ctx.SetMaxDynamicShared).
type dynShared struct {
	name  string
	bytes int
}

// load compiles (or takes from the disk cache under cacheDir) the kernels
// with the NVRTC options opts and loads them once per key, resolving every
// kernel of kernelNames (and of wgmmaKernelNames when key.wgmma) and
// opting the kernels of shared into their dynamic shared memory. Call
// inside Do.
func (d *gpuDevice) load(c *cuda.Ctx, key moduleKey, cacheDir string, opts []string, shared []dynShared) (*kernels, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if k, ok := d.mods[key]; ok {
		return k, nil
	}
	src, err := kernelSource()
	if err != nil {
		return nil, err
	}
	bin, err := d.compiler.CompileCached(cacheDir, src, "dqnflow.cu", d.arch(), opts...)
	if err != nil {
		return nil, fmt.Errorf("compile kernels for sm_%d: %w", d.arch(), err)
	}
	mod, err := c.LoadModule(bin)
	if err != nil {
		return nil, err
	}
	k := &kernels{mod: mod, fn: map[string]cuda.Function{}, wgmma: key.wgmma}
	names := kernelNames
	if key.wgmma {
		names = append(names[:len(names):len(names)], wgmmaKernelNames...)
	}
	for _, name := range names {
		f, err := mod.Function(name)
		if err != nil {
			return nil, err
		}
		k.fn[name] = f
	}
	for _, sh := range shared {
		if err := c.SetMaxDynamicShared(k.fn[sh.name], sh.bytes); err != nil {
			return nil, fmt.Errorf("%s: %w", sh.name, err)
		}
	}
	d.mods[key] = k
	return k, nil
}

// checked is the precision self-check result of the module key, kept per
// device: check runs the first time (and again after a failure).
func (d *gpuDevice) checked(key moduleKey, check func() (string, error)) (string, error) {
	d.mu.Lock()
	s, ok := d.checks[key]
	d.mu.Unlock()
	if ok {
		return s, nil
	}
	s, err := check()
	if err != nil {
		return "", err
	}
	d.mu.Lock()
	d.checks[key] = s
	d.mu.Unlock()
	return s, nil
}

// arena owns device allocations and frees them together.
type arena struct {
	ptrs []cuda.DevPtr
}

// alloc allocates bytes (at least 8) of device memory, zeroed on stream s
// before it returns. The wait matters: s is a non-blocking stream, which
// the legacy default stream's synchronous copies (cuda.Upload) do not wait
// for, so an upload right after an alloc could land before the zeroing and
// be wiped. On an idle GPU the zeroing ran first; on an H200 shared by
// eight processes it often did not, and kernels read zeroed arguments
// (illegal addresses, a failed precision self-check, NaN losses:
// TestUploadAfterAllocLandsOnABusyGPU, docs/perf/gpu-2026-12-05.md).
// Buffers are allocated when a trainer or a plan is built, not per step.
func (a *arena) alloc(c *cuda.Ctx, s cuda.Stream, bytes int) (cuda.DevPtr, error) {
	bytes = max(bytes, 8)
	bytes = (bytes + 255) &^ 255
	p, err := c.Alloc(bytes)
	if err != nil {
		return 0, err
	}
	a.ptrs = append(a.ptrs, p)
	if err := c.MemsetD8Async(p, 0, bytes, s); err != nil {
		return p, err
	}
	return p, c.Sync(s)
}

// batch is a sticky-error allocator for a group of buffers: each call
// allocates unless an earlier one failed, and err reports the first failure.
type batch struct {
	a   *arena
	c   *cuda.Ctx
	s   cuda.Stream
	err error
}

func (a *arena) batch(c *cuda.Ctx, s cuda.Stream) *batch { return &batch{a: a, c: c, s: s} }

func (b *batch) alloc(bytes int) cuda.DevPtr {
	if b.err != nil {
		return 0
	}
	var p cuda.DevPtr
	p, b.err = b.a.alloc(b.c, b.s, bytes)
	return p
}

func (a *arena) free(c *cuda.Ctx) error {
	var first error
	for _, p := range a.ptrs {
		if err := c.Free(p); err != nil && first == nil {
			first = err
		}
	}
	a.ptrs = nil
	return first
}
