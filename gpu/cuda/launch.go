package cuda

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"runtime"
	"unsafe"
)

// Dim3 is a grid or block size; every dimension must be at least 1.
type Dim3 struct{ X, Y, Z uint32 }

// Module is a loaded CUBIN or PTX image.
type Module struct {
	d *Device
	h uintptr // CUmodule
}

// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES (cuda.h).
const funcAttrMaxDynamicSharedSizeBytes = 8

var (
	elfMagic    = []byte("\x7fELF")
	fatbinMagic = []byte{0x50, 0xed, 0x55, 0xba} // 0xBA55ED50, little-endian
)

// LoadModule loads a CUBIN, fatbin or PTX image (cuModuleLoadData). PTX text
// without a terminating NUL gets one appended to a copy.
func (c *Ctx) LoadModule(image []byte) (*Module, error) {
	if len(image) == 0 {
		return nil, errors.Join(errors.New("cuda: LoadModule: empty image"), c.enter())
	}
	if !bytes.HasPrefix(image, elfMagic) && !bytes.HasPrefix(image, fatbinMagic) && image[len(image)-1] != 0 {
		image = append(image[:len(image):len(image)], 0)
	}
	var h uintptr
	err := c.call("cuModuleLoadData", func(a *driverAPI) int32 { return a.cuModuleLoadData(&h, unsafe.Pointer(&image[0])) })
	runtime.KeepAlive(image)
	if err != nil {
		return nil, fmt.Errorf("cuda: LoadModule (%d bytes): %w", len(image), err)
	}
	return &Module{d: c.d, h: h}, nil
}

// UnloadModule unloads m; its Functions become invalid.
func (c *Ctx) UnloadModule(m *Module) error {
	if m == nil || m.h == 0 {
		return c.enter()
	}
	err := c.call("cuModuleUnload", func(a *driverAPI) int32 { return a.cuModuleUnload(m.h) })
	if err == nil {
		m.h = 0
	}
	return err
}

// Function looks up a kernel by its symbol name; declare kernels extern "C"
// so that the name is not mangled. It may be called inside or outside
// Device.Do: it runs on the device thread either way.
func (m *Module) Function(name string) (Function, error) {
	if m == nil || m.d == nil || m.h == 0 {
		return 0, fmt.Errorf("cuda: kernel %q: module is nil or unloaded", name)
	}
	var f Function
	err := m.d.Do(func(c *Ctx) error {
		return c.call("cuModuleGetFunction", func(a *driverAPI) int32 { return a.cuModuleGetFunction(&f, m.h, name) })
	})
	if err != nil {
		var ce *Error
		if errors.As(err, &ce) && ce.Code == cudaErrorNotFound {
			return 0, fmt.Errorf("cuda: kernel %q: %w (is it declared extern \"C\" __global__?)", name, err)
		}
		return 0, fmt.Errorf("cuda: kernel %q: %w", name, err)
	}
	return f, nil
}

// SetMaxDynamicShared allows f to be launched with up to bytes of dynamic
// shared memory; above 48 KiB a kernel needs this opt-in.
func (c *Ctx) SetMaxDynamicShared(f Function, bytes int) error {
	if bytes < 0 || bytes > math.MaxInt32 {
		return errors.Join(fmt.Errorf("cuda: SetMaxDynamicShared: %d bytes out of range", bytes), c.enter())
	}
	return c.call("cuFuncSetAttribute", func(a *driverAPI) int32 {
		return a.cuFuncSetAttribute(f, funcAttrMaxDynamicSharedSizeBytes, int32(bytes))
	})
}

// Launch queues f on s with the given grid, block, dynamic shared memory and
// arguments. Each argument must be DevPtr, int32, uint32, int64, uint64,
// float32 or float64, matching the kernel's parameter type; anything else
// (a plain int included) is an error naming the argument. The driver copies
// the argument values during the call, so they need not outlive it.
func (c *Ctx) Launch(f Function, grid, block Dim3, sharedBytes int, s Stream, args ...any) error {
	k, err := c.launchArgs("Launch", f, grid, block, sharedBytes, args)
	if err != nil {
		return err
	}
	r := c.api.cuLaunchKernel(f, grid.X, grid.Y, grid.Z, block.X, block.Y, block.Z,
		uint32(sharedBytes), s, k.params(), nil)
	runtime.KeepAlive(k)
	return c.api.check("cuLaunchKernel", r)
}

// launchConfig is CUlaunchConfig (cuda.h, 56 bytes): the grid, the block,
// the dynamic shared memory, the stream and the launch attributes.
type launchConfig struct {
	gridX, gridY, gridZ    uint32
	blockX, blockY, blockZ uint32
	shared                 uint32
	_                      uint32
	stream                 Stream
	attrs                  *launchAttr
	numAttrs               uint32
	_                      uint32
}

// launchAttr is CUlaunchAttribute (72 bytes): the attribute's id, padding
// to 8 bytes, then the 64-byte CUlaunchAttributeValue union, whose first
// int is the value of the attributes used here.
type launchAttr struct {
	id    uint32
	_     uint32
	value [8]uint64
}

// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION (cuda.h).
const launchAttrProgrammaticStreamSerialization = 6

// CanLaunchDependent reports whether the driver has cuLaunchKernelEx, which
// LaunchDependent needs (CUDA 11.8 and newer).
func (c *Ctx) CanLaunchDependent() bool { return c.api != nil && c.api.cuLaunchKernelEx != nil }

// LaunchDependent queues f on s like Launch, as a programmatic dependent
// launch (cuLaunchKernelEx with programmatic stream serialization, sm_90
// and newer): the GPU may schedule f's blocks before the kernel queued
// before it on s has finished, once every block of that kernel has
// executed griddepcontrol.launch_dependents or exited. f must execute
// griddepcontrol.wait in every thread before it reads what that kernel
// wrote. Captured into a CUDA graph, the launch becomes a programmatic
// edge. Without cuLaunchKernelEx in the driver it is an error, never a
// plain launch.
func (c *Ctx) LaunchDependent(f Function, grid, block Dim3, sharedBytes int, s Stream, args ...any) error {
	k, err := c.launchArgs("LaunchDependent", f, grid, block, sharedBytes, args)
	if err != nil {
		return err
	}
	if !c.CanLaunchDependent() {
		return errors.New("cuda: LaunchDependent: the driver has no cuLaunchKernelEx (CUDA 11.8 or newer needed)")
	}
	attr := &launchAttr{id: launchAttrProgrammaticStreamSerialization}
	attr.value[0] = 1
	cfg := &launchConfig{gridX: grid.X, gridY: grid.Y, gridZ: grid.Z, blockX: block.X, blockY: block.Y, blockZ: block.Z,
		shared: uint32(sharedBytes), stream: s, attrs: attr, numAttrs: 1}
	r := c.api.cuLaunchKernelEx(cfg, f, k.params(), nil)
	runtime.KeepAlive(k)
	runtime.KeepAlive(cfg)
	runtime.KeepAlive(attr)
	return c.api.check("cuLaunchKernelEx", r)
}

// launchArgs checks what Launch and LaunchDependent (call, for the
// errors) are given, before the driver sees it, and packs the arguments.
func (c *Ctx) launchArgs(call string, f Function, grid, block Dim3, sharedBytes int, args []any) (*kernelArgs, error) {
	if err := c.enter(); err != nil {
		return nil, err
	}
	if f == 0 {
		return nil, fmt.Errorf("cuda: %s: nil Function", call)
	}
	if err := checkDim(call, "grid", grid); err != nil {
		return nil, err
	}
	if err := checkDim(call, "block", block); err != nil {
		return nil, err
	}
	if sharedBytes < 0 || int64(sharedBytes) > math.MaxUint32 {
		return nil, fmt.Errorf("cuda: %s: shared memory %d bytes out of range", call, sharedBytes)
	}
	return packArgs(args)
}

func checkDim(call, what string, d Dim3) error {
	if d.X == 0 || d.Y == 0 || d.Z == 0 {
		return fmt.Errorf("cuda: %s: %s %v: every dimension must be at least 1", call, what, d)
	}
	return nil
}

// kernelArgs is the kernelParams array of cuLaunchKernel: ptrs[i] points at
// slots[i], which holds argument i in its C representation (4 or 8 bytes at
// the start of an 8-byte, 8-aligned slot). Both live in Go memory, which the
// collector does not move; the caller keeps them alive across the call.
type kernelArgs struct {
	slots []uint64
	ptrs  []unsafe.Pointer
}

// params returns the void** for cuLaunchKernel, nil when there are no
// arguments.
func (k *kernelArgs) params() *unsafe.Pointer {
	if len(k.ptrs) == 0 {
		return nil
	}
	return &k.ptrs[0]
}

// packArgs builds the kernel parameter array.
func packArgs(args []any) (*kernelArgs, error) {
	k := &kernelArgs{}
	if len(args) == 0 {
		return k, nil
	}
	k.slots = make([]uint64, len(args))
	k.ptrs = make([]unsafe.Pointer, len(args))
	for i, a := range args {
		p := unsafe.Pointer(&k.slots[i])
		switch v := a.(type) {
		case DevPtr:
			*(*DevPtr)(p) = v
		case int32:
			*(*int32)(p) = v
		case uint32:
			*(*uint32)(p) = v
		case int64:
			*(*int64)(p) = v
		case uint64:
			*(*uint64)(p) = v
		case float32:
			*(*float32)(p) = v
		case float64:
			*(*float64)(p) = v
		default:
			return nil, fmt.Errorf("cuda: Launch argument %d has type %T; kernel arguments must be DevPtr, int32, uint32, int64, uint64, float32 or float64 (convert an int to int32 or int64 to match the kernel)", i, a)
		}
		k.ptrs[i] = p
	}
	return k, nil
}
