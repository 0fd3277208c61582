package device

import (
	"fmt"
	"github.com/dqnflow/dqnflow/gpu/kernels"
	"sync"

	"github.com/dqnflow/dqnflow/gpu/cuda"
)

// Kernels is the loaded module of one storage mode on one device, with every
// kernel resolved once.
type Kernels struct {
	mod   *cuda.Module
	Fn    map[string]cuda.Function
	WGMMA bool // the forward GEMMs can run on wgmma (kernels.WGMMANames)
}

// ModuleKey names a compiled module: storage mode, whether fp32 runs
// 3xTF32, whether it has the wgmma GEMMs, and the model sizes compiled in.
type ModuleKey struct {
	BF16, TF32, WGMMA   bool
	Atoms, T1, T2, Head int
}

// Device is one opened CUDA device with its compiled modules, shared by
// every trainer of the process on that device.
type Device struct {
	Dev      *cuda.Device
	Info     cuda.DeviceInfo
	compiler *cuda.Compiler
	mu       sync.Mutex
	mods     map[ModuleKey]*Kernels
	checks   map[ModuleKey]string // precision self-check result per module
	hasEx    bool                 // the driver has cuLaunchKernelEx (dependentLaunches)
	nvrtc    int                  // NVRTC's major version (useWGMMA)
}

// Setup is a Tuning resolved on one device: how the kernels of the
// trainer's graphs follow each other and whether the GEMMs have wgmma.
type Setup struct {
	Tuning
	Launch launchMode // dependentLaunches
	WGMMA  gemmPath   // useWGMMA
}

// Resolve checks tu and decides what it runs on d.
func (d *Device) Resolve(tu Tuning) (Setup, error) {
	if err := tu.Validate(); err != nil {
		return Setup{}, err
	}
	s := Setup{Tuning: tu}
	var err error
	if s.Launch, err = dependentLaunches(d.Info, d.hasEx, tu.PDL); err != nil {
		return Setup{}, err
	}
	if s.WGMMA, err = useWGMMA(d.Info, d.nvrtc, tu.WGMMA); err != nil {
		return Setup{}, err
	}
	return s, nil
}

// gemmPath says whether a device's bf16 and 3xTF32 fp32 modules compile
// the forward GEMMs for Hopper's warpgroup MMA, and why (useWGMMA).
type gemmPath struct {
	On   bool
	Desc string
}

// launchMode is how the kernels of the trainer's CUDA graphs follow each
// other on a device (dependentLaunches).
type launchMode struct {
	Dependent bool   // launched as programmatic dependents (cuda.Ctx.LaunchDependent)
	Desc      string // which, and why (Trainer.Launches)
}

var (
	devicesMu sync.Mutex
	devices   = map[int]*Device{}
)

// Open opens CUDA device ordinal once per process.
func Open(ordinal int) (*Device, error) {
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
	d := &Device{Dev: dev, Info: dev.Info(), compiler: comp, mods: map[ModuleKey]*Kernels{}, checks: map[ModuleKey]string{}}
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
			return launchMode{Desc: "serial: " + why}, nil
		}
		return launchMode{Dependent: true, Desc: "programmatic dependent"}, nil
	case "on":
		if why != "" {
			return launchMode{}, fmt.Errorf("gpu tuning pdl = on (DQNFLOW_PDL): %s", why)
		}
		return launchMode{Dependent: true, Desc: "programmatic dependent"}, nil
	case "off":
		return launchMode{Desc: "serial: gpu tuning pdl = off (DQNFLOW_PDL)"}, nil
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
			return gemmPath{On: true, Desc: "wgmma (sm_90a)"}, nil
		}
		if setting == "on" {
			return gemmPath{}, fmt.Errorf("gpu tuning wgmma = on (DQNFLOW_WGMMA): %s", why)
		}
		return gemmPath{Desc: "mma.sync: " + why}, nil
	case "off":
		return gemmPath{Desc: "mma.sync: gpu tuning wgmma = off (DQNFLOW_WGMMA)"}, nil
	}
	return gemmPath{}, fieldErr("wgmma", "%q: must be auto, on or off", setting)
}

// Arch is the device's compute capability as NVRTC's sm_XY number.
func (d *Device) Arch() int { return d.Info.Major*10 + d.Info.Minor }

// DynShared is a kernel that needs more than 48 KiB of dynamic shared
// memory, and how much (cuda.Ctx.SetMaxDynamicShared).
type DynShared struct {
	Name  string
	Bytes int
}

// Load compiles (or takes from the disk cache under cacheDir) the kernels
// with the NVRTC options opts and loads them once per key, resolving every
// kernel of kernels.Names (and of kernels.WGMMANames when key.WGMMA) and
// opting the kernels of shared into their dynamic shared memory. Call
// inside Do.
func (d *Device) Load(c *cuda.Ctx, key ModuleKey, cacheDir string, opts []string, shared []DynShared) (*Kernels, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if k, ok := d.mods[key]; ok {
		return k, nil
	}
	src, err := kernels.Source()
	if err != nil {
		return nil, err
	}
	bin, err := d.compiler.CompileCached(cacheDir, src, "dqnflow.cu", d.Arch(), opts...)
	if err != nil {
		return nil, fmt.Errorf("compile kernels for sm_%d: %w", d.Arch(), err)
	}
	mod, err := c.LoadModule(bin)
	if err != nil {
		return nil, err
	}
	k := &Kernels{mod: mod, Fn: map[string]cuda.Function{}, WGMMA: key.WGMMA}
	names := kernels.Names
	if key.WGMMA {
		names = append(names[:len(names):len(names)], kernels.WGMMANames...)
	}
	for _, name := range names {
		f, err := mod.Function(name)
		if err != nil {
			return nil, err
		}
		k.Fn[name] = f
	}
	for _, sh := range shared {
		if err := c.SetMaxDynamicShared(k.Fn[sh.Name], sh.Bytes); err != nil {
			return nil, fmt.Errorf("%s: %w", sh.Name, err)
		}
	}
	d.mods[key] = k
	return k, nil
}

// Checked is the precision self-check result of the module key, kept per
// device: check runs the first time (and again after a failure).
func (d *Device) Checked(key ModuleKey, check func() (string, error)) (string, error) {
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

// Arena owns device allocations and frees them together.
type Arena struct {
	ptrs []cuda.DevPtr
}

// Alloc allocates bytes (at least 8) of device memory, zeroed on stream s
// before it returns. The wait matters: s is a non-blocking stream, which
// the legacy default stream's synchronous copies (cuda.Upload) do not wait
// for, so an upload right after an alloc could land before the zeroing and
// be wiped. On an idle GPU the zeroing ran first; on an H200 shared by
// eight processes it often did not, and kernels read zeroed arguments
// (illegal addresses, a failed precision self-check, NaN losses:
// TestUploadAfterAllocLandsOnABusyGPU, docs/perf/gpu-2026-12-05.md).
// Buffers are allocated when a trainer or a plan is built, not per step.
func (a *Arena) Alloc(c *cuda.Ctx, s cuda.Stream, bytes int) (cuda.DevPtr, error) {
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

// Batch is a sticky-error allocator for a group of buffers: each call
// allocates unless an earlier one failed, and err reports the first failure.
type Batch struct {
	a   *Arena
	c   *cuda.Ctx
	s   cuda.Stream
	Err error
}

func (a *Arena) Batch(c *cuda.Ctx, s cuda.Stream) *Batch { return &Batch{a: a, c: c, s: s} }

func (b *Batch) Alloc(bytes int) cuda.DevPtr {
	if b.Err != nil {
		return 0
	}
	var p cuda.DevPtr
	p, b.Err = b.a.Alloc(b.c, b.s, bytes)
	return p
}

func (a *Arena) Free(c *cuda.Ctx) error {
	var first error
	for _, p := range a.ptrs {
		if err := c.Free(p); err != nil && first == nil {
			first = err
		}
	}
	a.ptrs = nil
	return first
}
