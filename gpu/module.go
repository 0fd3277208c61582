package gpu

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/gpu/cuda"
)

// kernels is the loaded module of one storage mode on one device, with every
// kernel resolved once.
type kernels struct {
	mod   *cuda.Module
	fn    map[string]cuda.Function
	wgmma bool // the forward GEMMs can run on wgmma (wgmmaKernelNames)
}

// CacheDir is where compiled kernels are kept: $DQNFLOW_KERNEL_CACHE, or
// dqnflow/kernels under the user cache folder, or the temporary folder.
func CacheDir() string {
	if d := os.Getenv("DQNFLOW_KERNEL_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "dqnflow", "kernels")
	}
	return filepath.Join(os.TempDir(), "dqnflow-kernels")
}

// moduleKey names a compiled module: storage mode, whether it has the
// fused forward, and the model sizes compiled in.
type moduleKey struct {
	bf16, fused, tf32   bool
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
	checks   map[bool]string // precision self-check result per storage mode
	launch   launchMode      // how the kernels of the trainer's graphs follow each other
	wgmma    gemmPath        // whether bf16 and 3xTF32 fp32 modules have the wgmma GEMMs (useWGMMA)
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
	early     bool   // the kernels are compiled with launch_dependents (PDL_EARLY=1)
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
	d := &gpuDevice{dev: dev, info: dev.Info(), compiler: comp, mods: map[moduleKey]*kernels{}, checks: map[bool]string{}}
	var hasEx bool
	if err := dev.Do(func(c *cuda.Ctx) error { hasEx = c.CanLaunchDependent(); return nil }); err != nil {
		dev.Close()
		return nil, err
	}
	if d.launch, err = dependentLaunches(d.info, hasEx, os.Getenv("DQNFLOW_PDL")); err != nil {
		dev.Close()
		return nil, fmt.Errorf("cuda:%d: %w", ordinal, err)
	}
	nv, _, err := comp.Version()
	if err != nil {
		dev.Close()
		return nil, fmt.Errorf("cuda:%d: %w", ordinal, err)
	}
	if d.wgmma, err = useWGMMA(d.info, nv, os.Getenv("DQNFLOW_WGMMA")); err != nil {
		dev.Close()
		return nil, fmt.Errorf("cuda:%d: %w", ordinal, err)
	}
	for _, err := range []error{fp32TCErr, wgmmaDXErr, wgEpilogueErr, spectralBranchErr, stepsPerGraphErr, adamRefreshErr} {
		if err != nil {
			dev.Close()
			return nil, fmt.Errorf("cuda:%d: %w", ordinal, err)
		}
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
// setting is DQNFLOW_PDL: empty (that choice), "on" (the same, but an
// error where it cannot be had), "early" (programmatic dependents with
// kernels compiled to let their dependents launch at once, PDL_EARLY=1:
// measured slower, 0.257 against 0.243 ms at 4096) or "off" (one after
// the other, for comparisons).
func dependentLaunches(info cuda.DeviceInfo, driverHasEx bool, setting string) (launchMode, error) {
	why := ""
	switch {
	case info.Major < 9:
		why = fmt.Sprintf("sm_%d%d has no programmatic dependent launch (sm_90 and newer)", info.Major, info.Minor)
	case !driverHasEx:
		why = "the driver has no cuLaunchKernelEx (CUDA 11.8 or newer)"
	}
	switch setting {
	case "":
		if why != "" {
			return launchMode{desc: "serial: " + why}, nil
		}
		return launchMode{dependent: true, desc: "programmatic dependent"}, nil
	case "on", "early":
		if why != "" {
			return launchMode{}, fmt.Errorf("DQNFLOW_PDL=%s: %s", setting, why)
		}
		if setting == "early" {
			return launchMode{dependent: true, early: true, desc: "programmatic dependent, launched early: DQNFLOW_PDL=early"}, nil
		}
		return launchMode{dependent: true, desc: "programmatic dependent"}, nil
	case "off":
		return launchMode{desc: "serial: DQNFLOW_PDL=off"}, nil
	}
	return launchMode{}, fmt.Errorf("DQNFLOW_PDL %q: must be on, early, off or unset", setting)
}

// useWGMMA decides whether the bf16 and 3xTF32 fp32 modules of a device
// run the forward GEMMs (A and B k-contiguous, unsplit: job.wgmmaFits) on Hopper's
// warpgroup MMA, compiled for sm_90a (kernels/gemm.cu gemmWgmma). By
// default where it can be had: compute capability 9.0 and NVRTC 12 or
// newer (NVRTC 11.8 has no sm_90a); elsewhere those GEMMs run on mma.sync
// like the others, and the description says why. setting is
// DQNFLOW_WGMMA: empty (that choice), "on" (an error where it cannot be
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
	case "", "on":
		if why == "" {
			return gemmPath{on: true, desc: "wgmma (sm_90a)"}, nil
		}
		if setting == "on" {
			return gemmPath{}, fmt.Errorf("DQNFLOW_WGMMA=on: %s", why)
		}
		return gemmPath{desc: "mma.sync: " + why}, nil
	case "off":
		return gemmPath{desc: "mma.sync: DQNFLOW_WGMMA=off"}, nil
	}
	return gemmPath{}, fmt.Errorf("DQNFLOW_WGMMA %q: must be on, off or unset", setting)
}

// arch is the device's compute capability as NVRTC's sm_XY number.
func (d *gpuDevice) arch() int { return d.info.Major*10 + d.info.Minor }

// module compiles (or takes from the disk cache) and loads the kernels for
// model m in one storage mode, with the fused forward when fused. Call
// inside Do.
func (d *gpuDevice) module(c *cuda.Ctx, m config.ModelConfig, bf16, fused bool) (*kernels, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	key := moduleKey{bf16, fused, !bf16 && fp32TC, m.Atoms, m.Trunk1, m.Trunk2, m.Head}
	if k, ok := d.mods[key]; ok {
		return k, nil
	}
	if !bf16 && fp32TC && d.arch() < 80 {
		return nil, fmt.Errorf("fp32 on sm_%d: the fp32 GEMMs run as 3xTF32 on the tensor cores, which need sm_80 or newer; set DQNFLOW_FP32_GEMM=simt for fmaf on the CUDA cores", d.arch())
	}
	src, err := kernelSource()
	if err != nil {
		return nil, err
	}
	wg := d.wgmma.on && (bf16 || fp32TC)
	bin, err := d.compiler.CompileCached(CacheDir(), src, "dqnflow.cu", d.arch(), kernelOptions(m, bf16, fused, d.launch.early, wg, fp32TC)...)
	if err != nil {
		return nil, fmt.Errorf("compile kernels for sm_%d: %w", d.arch(), err)
	}
	mod, err := c.LoadModule(bin)
	if err != nil {
		return nil, err
	}
	k := &kernels{mod: mod, fn: map[string]cuda.Function{}, wgmma: wg}
	names := kernelNames
	if fused {
		names = append(names[:len(names):len(names)], fusedKernelNames...)
	}
	if wg {
		names = append(names[:len(names):len(names)], wgmmaKernelNames...)
	}
	for _, name := range names {
		f, err := mod.Function(name)
		if err != nil {
			return nil, err
		}
		k.fn[name] = f
	}
	kc, err := parseGradKChunk(os.Getenv("DQNFLOW_GRAD_KCHUNK"))
	if err != nil {
		return nil, err
	}
	gradKChunk = kc
	if lossSlotsSet, err = parseLossSlots(os.Getenv("DQNFLOW_LOSS_SLOTS")); err != nil {
		return nil, err
	}
	if !slices.Contains(gemmVariants, gemmVariant) {
		return nil, fmt.Errorf("DQNFLOW_GEMM_VARIANT %q: must be one of o (the default), p or base", gemmVariant)
	}
	shapes := allShapes(bf16)
	if wg {
		shapes = append(append(shapes, wgmmaShapes(bf16)...), wgmmaMaskShapes(bf16)...)
	}
	for _, sh := range shapes {
		if sh.shared > 48<<10 {
			if err := c.SetMaxDynamicShared(k.fn[sh.name], sh.shared); err != nil {
				return nil, fmt.Errorf("%s: %w", sh.name, err)
			}
		}
	}
	if fused {
		for _, mk := range mlpKernels {
			if err := c.SetMaxDynamicShared(k.fn[mk.name], mlpShared(mk.bm, m)); err != nil {
				return nil, fmt.Errorf("%s: %w", mk.name, err)
			}
		}
	}
	d.mods[key] = k
	return k, nil
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
