package cuda

import (
	"strconv"
	"unsafe"
)

// driverSpec is where libcuda.so.1 is looked for. The driver ships the
// library with the kernel module, so the loader's search path normally finds
// it; the folders cover containers (the NVIDIA container toolkit mounts it in
// /usr/local/nvidia/lib64) and hosts whose ld.so.cache lacks it.
var driverSpec = libSpec{
	envVar:  "DQNFLOW_LIBCUDA",
	sonames: []string{"libcuda.so.1", "libcuda.so"},
	dirs: []string{
		"/usr/local/nvidia/lib64",
		"/usr/lib/x86_64-linux-gnu",
		"/usr/lib/aarch64-linux-gnu",
		"/usr/lib64",
		"/usr/lib/wsl/lib",
	},
	hint: "install the NVIDIA driver (in a container: run it with the GPU exposed, e.g. --gpus all), or set DQNFLOW_LIBCUDA to the path of libcuda.so.1",
}

// driverAPI holds the driver functions this package calls. CUresult is a C
// enum (int32); CUdevice is an int; handles are pointers (uintptr); size_t is
// uintptr.
type driverAPI struct {
	lib *library

	cuInit             func(flags uint32) int32
	cuDriverGetVersion func(v *int32) int32
	cuGetErrorName     func(code int32, s **byte) int32
	cuGetErrorString   func(code int32, s **byte) int32

	cuDeviceGetCount     func(n *int32) int32
	cuDeviceGet          func(dev *int32, ordinal int32) int32
	cuDeviceGetName      func(name *byte, n int32, dev int32) int32
	cuDeviceTotalMem     func(bytes *uintptr, dev int32) int32
	cuDeviceGetAttribute func(v *int32, attr int32, dev int32) int32
	cuDeviceGetUuid      func(uuid *[16]byte, dev int32) int32

	cuDevicePrimaryCtxRetain  func(ctx *uintptr, dev int32) int32
	cuDevicePrimaryCtxRelease func(dev int32) int32
	cuCtxSetCurrent           func(ctx uintptr) int32
	cuCtxSynchronize          func() int32

	cuMemAlloc        func(p *DevPtr, n uintptr) int32
	cuMemFree         func(p DevPtr) int32
	cuMemGetInfo      func(free, total *uintptr) int32
	cuMemAllocHost    func(p *unsafe.Pointer, n uintptr) int32
	cuMemFreeHost     func(p unsafe.Pointer) int32
	cuMemcpyHtoD      func(dst DevPtr, src unsafe.Pointer, n uintptr) int32
	cuMemcpyDtoH      func(dst unsafe.Pointer, src DevPtr, n uintptr) int32
	cuMemcpyDtoD      func(dst, src DevPtr, n uintptr) int32
	cuMemcpyHtoDAsync func(dst DevPtr, src unsafe.Pointer, n uintptr, s Stream) int32
	cuMemcpyDtoHAsync func(dst unsafe.Pointer, src DevPtr, n uintptr, s Stream) int32
	cuMemcpyDtoDAsync func(dst, src DevPtr, n uintptr, s Stream) int32
	cuMemsetD8Async   func(p DevPtr, v uint8, n uintptr, s Stream) int32
	cuMemsetD32Async  func(p DevPtr, v uint32, n uintptr, s Stream) int32

	cuModuleLoadData    func(m *uintptr, image unsafe.Pointer) int32
	cuModuleUnload      func(m uintptr) int32
	cuModuleGetFunction func(f *Function, m uintptr, name string) int32
	cuFuncSetAttribute  func(f Function, attr int32, v int32) int32
	cuLaunchKernel      func(f Function, gx, gy, gz, bx, by, bz, shared uint32, s Stream, params, extra *unsafe.Pointer) int32
	cuLaunchKernelEx    func(cfg *launchConfig, f Function, params, extra *unsafe.Pointer) int32 // optional: CUDA 11.8+

	cuStreamCreate      func(s *Stream, flags uint32) int32
	cuStreamSynchronize func(s Stream) int32
	cuStreamDestroy     func(s Stream) int32
	cuEventCreate       func(e *Event, flags uint32) int32
	cuEventRecord       func(e Event, s Stream) int32
	cuEventElapsedTime  func(ms *float32, start, end Event) int32
	cuEventSynchronize  func(e Event) int32
	cuEventDestroy      func(e Event) int32
	cuStreamWaitEvent   func(s Stream, e Event, flags uint32) int32

	cuStreamBeginCapture        func(s Stream, mode int32) int32
	cuStreamEndCapture          func(s Stream, g *Graph) int32
	cuGraphInstantiateWithFlags func(x *GraphExec, g Graph, flags uint64) int32
	cuGraphLaunch               func(x GraphExec, s Stream) int32
	cuGraphDestroy              func(g Graph) int32
	cuGraphExecDestroy          func(x GraphExec) int32
}

// symbols lists every binding of a. The _v2 names are the ABI that cuda.h
// has mapped the plain names to since CUDA 3.2/4.0/11.0; cuEventElapsedTime_v2
// is CUDA 12.8+, with the original as the fallback. cuGraphInstantiateWithFlags
// (CUDA 11.4) is the newest required symbol.
func (a *driverAPI) symbols() []symbol {
	req := func(fptr any, names ...string) symbol { return symbol{names: names, fptr: fptr} }
	opt := func(fptr any, names ...string) symbol { return symbol{names: names, fptr: fptr, optional: true} }
	return []symbol{
		req(&a.cuInit, "cuInit"),
		req(&a.cuDriverGetVersion, "cuDriverGetVersion"),
		req(&a.cuGetErrorName, "cuGetErrorName"),
		req(&a.cuGetErrorString, "cuGetErrorString"),

		req(&a.cuDeviceGetCount, "cuDeviceGetCount"),
		req(&a.cuDeviceGet, "cuDeviceGet"),
		req(&a.cuDeviceGetName, "cuDeviceGetName"),
		req(&a.cuDeviceTotalMem, "cuDeviceTotalMem_v2"),
		req(&a.cuDeviceGetAttribute, "cuDeviceGetAttribute"),
		req(&a.cuDeviceGetUuid, "cuDeviceGetUuid_v2", "cuDeviceGetUuid"),

		req(&a.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
		req(&a.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"),
		req(&a.cuCtxSetCurrent, "cuCtxSetCurrent"),
		req(&a.cuCtxSynchronize, "cuCtxSynchronize"),

		req(&a.cuMemAlloc, "cuMemAlloc_v2"),
		req(&a.cuMemFree, "cuMemFree_v2"),
		req(&a.cuMemGetInfo, "cuMemGetInfo_v2"),
		req(&a.cuMemAllocHost, "cuMemAllocHost_v2"),
		req(&a.cuMemFreeHost, "cuMemFreeHost"),
		req(&a.cuMemcpyHtoD, "cuMemcpyHtoD_v2"),
		req(&a.cuMemcpyDtoH, "cuMemcpyDtoH_v2"),
		req(&a.cuMemcpyDtoD, "cuMemcpyDtoD_v2"),
		req(&a.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"),
		req(&a.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"),
		req(&a.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"),
		req(&a.cuMemsetD8Async, "cuMemsetD8Async"),
		req(&a.cuMemsetD32Async, "cuMemsetD32Async"),

		req(&a.cuModuleLoadData, "cuModuleLoadData"),
		req(&a.cuModuleUnload, "cuModuleUnload"),
		req(&a.cuModuleGetFunction, "cuModuleGetFunction"),
		req(&a.cuFuncSetAttribute, "cuFuncSetAttribute"),
		req(&a.cuLaunchKernel, "cuLaunchKernel"),
		opt(&a.cuLaunchKernelEx, "cuLaunchKernelEx"),

		req(&a.cuStreamCreate, "cuStreamCreate"),
		req(&a.cuStreamSynchronize, "cuStreamSynchronize"),
		req(&a.cuStreamDestroy, "cuStreamDestroy_v2"),
		req(&a.cuEventCreate, "cuEventCreate"),
		req(&a.cuEventRecord, "cuEventRecord"),
		req(&a.cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime"),
		req(&a.cuEventSynchronize, "cuEventSynchronize"),
		req(&a.cuEventDestroy, "cuEventDestroy_v2"),
		req(&a.cuStreamWaitEvent, "cuStreamWaitEvent"),

		req(&a.cuStreamBeginCapture, "cuStreamBeginCapture_v2"),
		req(&a.cuStreamEndCapture, "cuStreamEndCapture"),
		req(&a.cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags"),
		req(&a.cuGraphLaunch, "cuGraphLaunch"),
		req(&a.cuGraphDestroy, "cuGraphDestroy"),
		req(&a.cuGraphExecDestroy, "cuGraphExecDestroy"),
	}
}

var driverOnce loaded[driverAPI]

func loadDriver() (*driverAPI, error) {
	return driverOnce.load(driverSpec, ErrNoDriver, "the driver is older than CUDA 11.4; update the NVIDIA driver",
		func(lib *library) (*driverAPI, []symbol) {
			a := &driverAPI{lib: lib}
			return a, a.symbols()
		})
}

// check turns a CUresult into nil or an *Error naming call.
func (a *driverAPI) check(call string, r int32) error {
	if r == 0 {
		return nil
	}
	e := &Error{Call: call, Code: int(r), Name: "CUresult(" + strconv.Itoa(int(r)) + ")"}
	var s *byte
	if a.cuGetErrorName(r, &s) == 0 && s != nil {
		e.Name = cString(s)
	}
	s = nil
	if a.cuGetErrorString(r, &s) == 0 && s != nil {
		e.Msg = cString(s)
	}
	return e
}

// cString copies the NUL-terminated C string at p (static storage owned by
// the library) into a Go string.
func cString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}
