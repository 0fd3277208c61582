package cuda

import (
	"errors"
	"fmt"
	"reflect"
	"unsafe"
)

// DevPtr is a device address (CUdeviceptr).
type DevPtr uint64

// Handles of driver objects. The zero Stream is the legacy default stream,
// which cannot be captured into a graph.
type (
	Stream    uintptr // CUstream
	Event     uintptr // CUevent
	Graph     uintptr // CUgraph
	GraphExec uintptr // CUgraphExec
	Function  uintptr // CUfunction
)

// Ctx makes CUDA calls for one Device. It is handed to the function given to
// Device.Do and is only valid inside it: every method checks that it runs on
// the device thread and returns an error otherwise.
type Ctx struct {
	d   *Device
	api *driverAPI
}

var errOutsideDo = errors.New("cuda: Ctx used outside Device.Do (it is only valid inside the function given to Do)")

// enter checks that c may make a call now.
func (c *Ctx) enter() error {
	if c == nil || c.d == nil {
		return errors.New("cuda: nil Ctx")
	}
	if threadID() != c.d.tid {
		return errOutsideDo
	}
	return nil
}

// call checks c and the status of one driver call.
func (c *Ctx) call(name string, r func(a *driverAPI) int32) error {
	if err := c.enter(); err != nil {
		return err
	}
	return c.api.check(name, r(c.api))
}

// size converts a byte or element count to size_t, refusing negatives.
func size(what string, n int) (uintptr, error) {
	if n < 0 {
		return 0, fmt.Errorf("cuda: %s: negative size %d", what, n)
	}
	return uintptr(n), nil
}

// Device returns the device c belongs to.
func (c *Ctx) Device() *Device { return c.d }

// Alloc allocates bytes of device memory (cuMemAlloc_v2). The memory is not
// initialised.
func (c *Ctx) Alloc(bytes int) (DevPtr, error) {
	if bytes <= 0 {
		return 0, fmt.Errorf("cuda: Alloc: bytes must be positive, got %d", bytes)
	}
	var p DevPtr
	err := c.call("cuMemAlloc_v2", func(a *driverAPI) int32 { return a.cuMemAlloc(&p, uintptr(bytes)) })
	if err != nil {
		return 0, fmt.Errorf("cuda: Alloc %d bytes: %w", bytes, err)
	}
	return p, nil
}

// Free releases memory from Alloc (cuMemFree_v2). Freeing 0 does nothing.
func (c *Ctx) Free(p DevPtr) error {
	if p == 0 {
		return c.enter()
	}
	return c.call("cuMemFree_v2", func(a *driverAPI) int32 { return a.cuMemFree(p) })
}

// MemGetInfo returns the free and total device memory in bytes.
func (c *Ctx) MemGetInfo() (free, total uint64, err error) {
	var f, t uintptr
	err = c.call("cuMemGetInfo_v2", func(a *driverAPI) int32 { return a.cuMemGetInfo(&f, &t) })
	return uint64(f), uint64(t), err
}

// AllocHost allocates bytes of page-locked host memory (cuMemAllocHost_v2),
// which asynchronous copies can use without staging and which stays valid
// for copies recorded in a graph. Release it with FreeHost.
func (c *Ctx) AllocHost(bytes int) (unsafe.Pointer, error) {
	if bytes <= 0 {
		return nil, fmt.Errorf("cuda: AllocHost: bytes must be positive, got %d", bytes)
	}
	var p unsafe.Pointer
	err := c.call("cuMemAllocHost_v2", func(a *driverAPI) int32 { return a.cuMemAllocHost(&p, uintptr(bytes)) })
	return p, err
}

// FreeHost releases memory from AllocHost. Freeing nil does nothing.
func (c *Ctx) FreeHost(p unsafe.Pointer) error {
	if p == nil {
		return c.enter()
	}
	return c.call("cuMemFreeHost", func(a *driverAPI) int32 { return a.cuMemFreeHost(p) })
}

// copyArgs validates a copy; ok is false for an empty copy, which is a no-op.
func copyArgs(what string, host unsafe.Pointer, bytes int) (n uintptr, ok bool, err error) {
	if n, err = size(what, bytes); err != nil || n == 0 {
		return 0, false, err
	}
	if host == nil {
		return 0, false, fmt.Errorf("cuda: %s: nil host pointer for %d bytes", what, bytes)
	}
	return n, true, nil
}

// HtoD copies bytes from host memory to the device and returns when the
// bytes are there. From pageable memory cuMemcpyHtoD returns once the
// driver has staged the data, before its DMA lands, and the copy runs on
// the legacy default stream, which work on the non-blocking streams
// (NewStream) does not wait for; so HtoD waits for that stream too, and a
// kernel queued after it on any stream reads the new bytes. It does not
// wait for work already queued on other streams: a caller that overwrites
// memory such work still reads must sync that stream first.
func (c *Ctx) HtoD(dst DevPtr, src unsafe.Pointer, bytes int) error {
	n, ok, err := copyArgs("HtoD", src, bytes)
	if !ok {
		return errors.Join(err, c.enter())
	}
	if err := c.call("cuMemcpyHtoD_v2", func(a *driverAPI) int32 { return a.cuMemcpyHtoD(dst, src, n) }); err != nil {
		return err
	}
	return c.call("cuStreamSynchronize", func(a *driverAPI) int32 { return a.cuStreamSynchronize(legacyStream) })
}

// DtoH copies bytes from the device to host memory and returns when done.
func (c *Ctx) DtoH(dst unsafe.Pointer, src DevPtr, bytes int) error {
	n, ok, err := copyArgs("DtoH", dst, bytes)
	if !ok {
		return errors.Join(err, c.enter())
	}
	return c.call("cuMemcpyDtoH_v2", func(a *driverAPI) int32 { return a.cuMemcpyDtoH(dst, src, n) })
}

// DtoD copies bytes between device buffers.
func (c *Ctx) DtoD(dst, src DevPtr, bytes int) error {
	n, err := size("DtoD", bytes)
	if err != nil || n == 0 {
		return errors.Join(err, c.enter())
	}
	return c.call("cuMemcpyDtoD_v2", func(a *driverAPI) int32 { return a.cuMemcpyDtoD(dst, src, n) })
}

// HtoDAsync queues a host-to-device copy on s. From pageable (ordinary Go)
// memory the driver stages the data before returning, so src may be reused
// at once; inside a graph capture, src must be AllocHost memory that
// outlives every replay.
func (c *Ctx) HtoDAsync(dst DevPtr, src unsafe.Pointer, bytes int, s Stream) error {
	n, ok, err := copyArgs("HtoDAsync", src, bytes)
	if !ok {
		return errors.Join(err, c.enter())
	}
	return c.call("cuMemcpyHtoDAsync_v2", func(a *driverAPI) int32 { return a.cuMemcpyHtoDAsync(dst, src, n, s) })
}

// DtoHAsync queues a device-to-host copy on s. To pageable memory it returns
// when the copy is done; to AllocHost memory it returns at once and dst is
// ready after Sync(s) or an event recorded after it.
func (c *Ctx) DtoHAsync(dst unsafe.Pointer, src DevPtr, bytes int, s Stream) error {
	n, ok, err := copyArgs("DtoHAsync", dst, bytes)
	if !ok {
		return errors.Join(err, c.enter())
	}
	return c.call("cuMemcpyDtoHAsync_v2", func(a *driverAPI) int32 { return a.cuMemcpyDtoHAsync(dst, src, n, s) })
}

// DtoDAsync queues a device-to-device copy on s.
func (c *Ctx) DtoDAsync(dst, src DevPtr, bytes int, s Stream) error {
	n, err := size("DtoDAsync", bytes)
	if err != nil || n == 0 {
		return errors.Join(err, c.enter())
	}
	return c.call("cuMemcpyDtoDAsync_v2", func(a *driverAPI) int32 { return a.cuMemcpyDtoDAsync(dst, src, n, s) })
}

// MemsetD8Async sets bytes bytes at p to v, on s.
func (c *Ctx) MemsetD8Async(p DevPtr, v uint8, bytes int, s Stream) error {
	n, err := size("MemsetD8Async", bytes)
	if err != nil || n == 0 {
		return errors.Join(err, c.enter())
	}
	return c.call("cuMemsetD8Async", func(a *driverAPI) int32 { return a.cuMemsetD8Async(p, v, n, s) })
}

// MemsetD32Async sets n 32-bit words at p (4-byte aligned) to v, on s.
// float32 zero is v = 0; other floats are math.Float32bits(x).
func (c *Ctx) MemsetD32Async(p DevPtr, v uint32, n int, s Stream) error {
	m, err := size("MemsetD32Async", n)
	if err != nil || m == 0 {
		return errors.Join(err, c.enter())
	}
	return c.call("cuMemsetD32Async", func(a *driverAPI) int32 { return a.cuMemsetD32Async(p, v, m, s) })
}

// Upload copies src to device memory at dst (which must hold len(src)
// elements) and returns when done. T must hold no Go pointers (numbers,
// arrays and structs of numbers).
func Upload[T any](c *Ctx, dst DevPtr, src []T) error {
	if err := checkPlain[T]("Upload"); err != nil {
		return err
	}
	if len(src) == 0 {
		return c.enter()
	}
	return c.HtoD(dst, unsafe.Pointer(unsafe.SliceData(src)), len(src)*int(unsafe.Sizeof(src[0])))
}

// Download copies len(dst) elements from device memory at src into dst and
// returns when done. T must hold no Go pointers.
func Download[T any](c *Ctx, dst []T, src DevPtr) error {
	if err := checkPlain[T]("Download"); err != nil {
		return err
	}
	if len(dst) == 0 {
		return c.enter()
	}
	return c.DtoH(unsafe.Pointer(unsafe.SliceData(dst)), src, len(dst)*int(unsafe.Sizeof(dst[0])))
}

// checkPlain refuses element types that contain Go pointers: their bytes mean
// nothing on the device, and writing device bytes over them would corrupt
// the Go heap.
func checkPlain[T any](what string) error {
	t := reflect.TypeFor[T]()
	if hasPointers(t) {
		return fmt.Errorf("cuda: %s: element type %s holds Go pointers; use numbers or structs of numbers", what, t)
	}
	return nil
}

func hasPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return false
	case reflect.Array:
		return t.Len() > 0 && hasPointers(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if hasPointers(t.Field(i).Type) {
				return true
			}
		}
		return false
	default:
		return true
	}
}

// Synchronize waits for all work on the device (cuCtxSynchronize).
func (c *Ctx) Synchronize() error {
	return c.call("cuCtxSynchronize", func(a *driverAPI) int32 { return a.cuCtxSynchronize() })
}
