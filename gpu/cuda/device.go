package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
)

// DeviceInfo describes one CUDA device.
type DeviceInfo struct {
	Ordinal      int
	Name         string
	TotalMem     uint64 // bytes
	Major, Minor int    // compute capability, e.g. 9.0 for an H100/H200
	SMs          int    // streaming multiprocessors
	UUID         string // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi prints it
}

// Device attributes (CUdevice_attribute in cuda.h).
const (
	attrMultiprocessorCount    = 16
	attrComputeCapabilityMajor = 75
	attrComputeCapabilityMinor = 76
)

// Devices lists the CUDA devices. It returns an error wrapping ErrNoDriver
// when the driver library cannot be opened, and no devices and no error when
// the driver loads but finds no GPU (CUDA_ERROR_NO_DEVICE).
func Devices() ([]DeviceInfo, error) {
	a, n, err := initDriver()
	if err != nil {
		var ce *Error
		if errors.As(err, &ce) && ce.Code == cudaErrorNoDevice {
			return nil, nil
		}
		return nil, err
	}
	out := make([]DeviceInfo, 0, n)
	for i := range n {
		info, err := a.deviceInfo(i)
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

// DriverVersion returns the CUDA version the driver supports, as
// 1000*major + 10*minor (13000 for CUDA 13.0).
func DriverVersion() (int, error) {
	a, err := loadDriver()
	if err != nil {
		return 0, err
	}
	var v int32
	if err := a.check("cuDriverGetVersion", a.cuDriverGetVersion(&v)); err != nil {
		return 0, err
	}
	return int(v), nil
}

// initDriver loads the driver, runs cuInit and counts the devices.
func initDriver() (*driverAPI, int, error) {
	a, err := loadDriver()
	if err != nil {
		return nil, 0, err
	}
	if err := a.check("cuInit", a.cuInit(0)); err != nil {
		return nil, 0, err
	}
	var n int32
	if err := a.check("cuDeviceGetCount", a.cuDeviceGetCount(&n)); err != nil {
		return nil, 0, err
	}
	return a, int(n), nil
}

// deviceInfo queries one device; it needs cuInit but no context.
func (a *driverAPI) deviceInfo(ordinal int) (DeviceInfo, error) {
	info := DeviceInfo{Ordinal: ordinal}
	var dev int32
	if err := a.check("cuDeviceGet", a.cuDeviceGet(&dev, int32(ordinal))); err != nil {
		return info, err
	}
	var name [256]byte
	if err := a.check("cuDeviceGetName", a.cuDeviceGetName(&name[0], int32(len(name)), dev)); err != nil {
		return info, err
	}
	name[len(name)-1] = 0
	info.Name = cString(&name[0])
	var total uintptr
	if err := a.check("cuDeviceTotalMem_v2", a.cuDeviceTotalMem(&total, dev)); err != nil {
		return info, err
	}
	info.TotalMem = uint64(total)
	for _, q := range []struct {
		attr int32
		dst  *int
	}{
		{attrComputeCapabilityMajor, &info.Major},
		{attrComputeCapabilityMinor, &info.Minor},
		{attrMultiprocessorCount, &info.SMs},
	} {
		var v int32
		if err := a.check("cuDeviceGetAttribute", a.cuDeviceGetAttribute(&v, q.attr, dev)); err != nil {
			return info, err
		}
		*q.dst = int(v)
	}
	var uuid [16]byte
	if err := a.check("cuDeviceGetUuid", a.cuDeviceGetUuid(&uuid, dev)); err != nil {
		return info, err
	}
	info.UUID = formatUUID(uuid)
	return info, nil
}

// formatUUID writes the 16 bytes in the 8-4-4-4-12 form nvidia-smi uses.
func formatUUID(u [16]byte) string {
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// Device is one GPU with its primary context, owned by one goroutine locked
// to its OS thread. Every CUDA call for the device runs on that thread,
// through Do. A Device is safe for concurrent use; Do calls are serialised.
type Device struct {
	info DeviceInfo
	api  *driverAPI
	dev  int32 // CUdevice
	tid  int   // the device thread, set before Open returns
	ctx  *Ctx

	work   chan request
	quit   chan struct{}
	exited chan struct{}

	closeOnce sync.Once
	closeErr  error
}

type request struct {
	f    func(c *Ctx) error
	errc chan error
}

// Open starts the device thread for the device with this ordinal and makes
// its primary context current there.
func Open(ordinal int) (*Device, error) {
	a, n, err := initDriver()
	if err != nil {
		return nil, fmt.Errorf("open CUDA device %d: %w", ordinal, err)
	}
	if n == 0 {
		return nil, fmt.Errorf("open CUDA device %d: the driver finds no CUDA device on this machine", ordinal)
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("open CUDA device %d: this machine has %d CUDA device(s), ordinals 0 to %d", ordinal, n, n-1)
	}
	info, err := a.deviceInfo(ordinal)
	if err != nil {
		return nil, fmt.Errorf("open CUDA device %d: %w", ordinal, err)
	}
	var dev int32
	if err := a.check("cuDeviceGet", a.cuDeviceGet(&dev, int32(ordinal))); err != nil {
		return nil, fmt.Errorf("open CUDA device %d: %w", ordinal, err)
	}
	d := newDevice(info, a, dev)
	if err := d.start(d.attach, d.detach); err != nil {
		return nil, fmt.Errorf("open CUDA device %d (%s): %w", ordinal, info.Name, err)
	}
	return d, nil
}

func newDevice(info DeviceInfo, a *driverAPI, dev int32) *Device {
	d := &Device{
		info:   info,
		api:    a,
		dev:    dev,
		work:   make(chan request),
		quit:   make(chan struct{}),
		exited: make(chan struct{}),
	}
	d.ctx = &Ctx{d: d, api: a}
	return d
}

// start runs the device goroutine and waits until attach has run on its
// thread.
func (d *Device) start(attach func() error, detach func() (unlock bool, err error)) error {
	ready := make(chan error)
	go d.loop(ready, attach, detach)
	return <-ready
}

// loop is the device goroutine. It never unlocks its thread while a context
// may be current on it: it exits locked instead, and Go then ends the thread.
func (d *Device) loop(ready chan<- error, attach func() error, detach func() (unlock bool, err error)) {
	runtime.LockOSThread()
	if err := attach(); err != nil {
		ready <- err
		return
	}
	d.tid = threadID()
	ready <- nil
	for {
		select {
		case r := <-d.work:
			r.errc <- d.run(r.f)
		case <-d.quit:
			unlock, err := detach()
			d.closeErr = err
			if unlock {
				runtime.UnlockOSThread()
			}
			close(d.exited)
			return
		}
	}
}

// attach makes the device's primary context current on the calling thread.
func (d *Device) attach() error {
	a := d.api
	var pctx uintptr
	if err := a.check("cuDevicePrimaryCtxRetain", a.cuDevicePrimaryCtxRetain(&pctx, d.dev)); err != nil {
		return err
	}
	if err := a.check("cuCtxSetCurrent", a.cuCtxSetCurrent(pctx)); err != nil {
		a.cuDevicePrimaryCtxRelease(d.dev)
		return err
	}
	return nil
}

// detach waits for outstanding work, detaches the context from the thread
// and releases the primary context (the driver destroys it, with every
// allocation in it, when the last holder releases it).
func (d *Device) detach() (unlock bool, err error) {
	a := d.api
	errSync := a.check("cuCtxSynchronize", a.cuCtxSynchronize())
	errCur := a.check("cuCtxSetCurrent", a.cuCtxSetCurrent(0))
	errRel := a.check("cuDevicePrimaryCtxRelease_v2", a.cuDevicePrimaryCtxRelease(d.dev))
	return errCur == nil, errors.Join(errSync, errCur, errRel)
}

// run calls f with the device's Ctx, turning a panic in f into an error so
// that a bug in one caller does not take the process down from the device
// thread.
func (d *Device) run(f func(c *Ctx) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("cuda: panic inside Device.Do on device %d: %v", d.info.Ordinal, r)
		}
	}()
	return f(d.ctx)
}

// Info returns what Open learnt about the device.
func (d *Device) Info() DeviceInfo { return d.info }

// Do runs f on the device thread and returns its error. The Ctx is only
// valid inside f. Do may be called from inside f (it then runs the inner f
// at once, on the same thread). After Close it returns ErrClosed.
func (d *Device) Do(f func(c *Ctx) error) error {
	if f == nil {
		return errors.New("cuda: Device.Do: nil function")
	}
	select {
	case <-d.quit:
		return ErrClosed
	default:
	}
	if threadID() == d.tid {
		return d.run(f)
	}
	errc := make(chan error, 1)
	select {
	case d.work <- request{f: f, errc: errc}:
		return <-errc
	case <-d.quit:
		return ErrClosed
	}
}

// Close waits for the work in flight, synchronises the context, releases it
// and ends the device thread. Memory, modules, streams, events and graphs of
// the device are destroyed with its primary context when no other Device for
// the same ordinal holds it. Close is idempotent; it must not be called from
// inside Do.
func (d *Device) Close() error {
	if threadID() == d.tid {
		select {
		case <-d.exited:
		default:
			return errors.New("cuda: Device.Close called inside Device.Do; call it after Do returns")
		}
	}
	d.closeOnce.Do(func() { close(d.quit) })
	<-d.exited
	return d.closeErr
}
