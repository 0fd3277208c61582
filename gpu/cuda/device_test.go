package cuda

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// startTestDevice runs the device goroutine without a driver: attach and
// detach do nothing, so Do, Close and the thread rules are tested anywhere.
// Its Ctx has no driver functions; only calls refused before reaching the
// driver may be made on it.
func startTestDevice(t *testing.T) *Device {
	t.Helper()
	d := newDevice(DeviceInfo{Ordinal: 7, Name: "test"}, nil, 7)
	if err := d.start(func() error { return nil }, func() (bool, error) { return true, nil }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestDoRunsEveryCallOnTheDeviceThread(t *testing.T) {
	d := startTestDevice(t)
	var wg sync.WaitGroup
	tids := make([]int, 64)
	for i := range tids {
		wg.Go(func() {
			if err := d.Do(func(c *Ctx) error { tids[i] = threadID(); return nil }); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for i, tid := range tids {
		if tid != d.tid {
			t.Fatalf("call %d ran on thread %d, the device thread is %d", i, tid, d.tid)
		}
	}
}

func TestDoInsideDoRunsAtOnce(t *testing.T) {
	d := startTestDevice(t)
	inner := false
	err := d.Do(func(c *Ctx) error {
		return d.Do(func(c2 *Ctx) error {
			inner = c2 == c && threadID() == d.tid
			return errors.New("inner error")
		})
	})
	if !inner || err == nil || err.Error() != "inner error" {
		t.Fatalf("nested Do: ran=%v err=%v", inner, err)
	}
}

func TestDoReturnsFsErrorAndRecoversFromPanic(t *testing.T) {
	d := startTestDevice(t)
	err := d.Do(func(c *Ctx) error { panic("boom") })
	if err == nil || !strings.Contains(err.Error(), "panic inside Device.Do on device 7: boom") {
		t.Fatalf("Do with a panicking f: %v", err)
	}
	if err := d.Do(func(c *Ctx) error { return nil }); err != nil {
		t.Fatalf("the device thread did not survive the panic: %v", err)
	}
	if err := d.Do(nil); err == nil {
		t.Fatal("Do(nil) succeeded")
	}
}

func TestCloseIsIdempotentAndEndsDo(t *testing.T) {
	d := startTestDevice(t)
	if err := d.Do(func(c *Ctx) error { return d.Close() }); err == nil {
		t.Fatal("Close inside Do succeeded (it would deadlock)")
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := d.Do(func(c *Ctx) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Do after Close: %v, want ErrClosed", err)
	}
}

func TestCloseReportsDetachErrors(t *testing.T) {
	d := newDevice(DeviceInfo{}, nil, 0)
	want := errors.New("release failed")
	if err := d.start(func() error { return nil }, func() (bool, error) { return true, want }); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); !errors.Is(err, want) {
		t.Fatalf("Close: %v, want %v", err, want)
	}
}

func TestOpenFailureInAttachIsReturned(t *testing.T) {
	d := newDevice(DeviceInfo{}, nil, 0)
	want := errors.New("no context")
	if err := d.start(func() error { return want }, nil); !errors.Is(err, want) {
		t.Fatalf("start: %v, want %v", err, want)
	}
}

// A Ctx kept after Do returns, or used from another goroutine, must refuse
// every call before it reaches the driver (which has no context on that
// thread, or another device's).
func TestCtxRefusesEveryCallOutsideDo(t *testing.T) {
	d := startTestDevice(t)
	var c *Ctx
	if err := d.Do(func(cc *Ctx) error { c = cc; return nil }); err != nil {
		t.Fatal(err)
	}
	buf := make([]float32, 4)
	host := unsafe.Pointer(&buf[0])
	calls := map[string]func() error{
		"Alloc":         func() error { _, err := c.Alloc(16); return err },
		"Free":          func() error { return c.Free(1) },
		"Free(0)":       func() error { return c.Free(0) },
		"MemGetInfo":    func() error { _, _, err := c.MemGetInfo(); return err },
		"AllocHost":     func() error { _, err := c.AllocHost(16); return err },
		"FreeHost":      func() error { return c.FreeHost(host) },
		"HtoD":          func() error { return c.HtoD(1, host, 16) },
		"HtoD empty":    func() error { return c.HtoD(1, nil, 0) },
		"DtoH":          func() error { return c.DtoH(host, 1, 16) },
		"DtoD":          func() error { return c.DtoD(1, 2, 16) },
		"HtoDAsync":     func() error { return c.HtoDAsync(1, host, 16, 0) },
		"DtoHAsync":     func() error { return c.DtoHAsync(host, 1, 16, 0) },
		"DtoDAsync":     func() error { return c.DtoDAsync(1, 2, 16, 0) },
		"MemsetD8":      func() error { return c.MemsetD8Async(1, 0, 16, 0) },
		"MemsetD32":     func() error { return c.MemsetD32Async(1, 0, 4, 0) },
		"Upload":        func() error { return Upload(c, 1, buf) },
		"Upload empty":  func() error { return Upload(c, 1, []float32{}) },
		"Download":      func() error { return Download(c, buf, 1) },
		"LoadModule":    func() error { _, err := c.LoadModule([]byte("\x7fELF")); return err },
		"UnloadModule":  func() error { return c.UnloadModule(&Module{d: d, h: 1}) },
		"Launch":        func() error { return c.Launch(1, Dim3{1, 1, 1}, Dim3{1, 1, 1}, 0, 0) },
		"LaunchDep":     func() error { return c.LaunchDependent(1, Dim3{1, 1, 1}, Dim3{1, 1, 1}, 0, 0) },
		"SetMaxShared":  func() error { return c.SetMaxDynamicShared(1, 1024) },
		"NewStream":     func() error { _, err := c.NewStream(); return err },
		"Sync":          func() error { return c.Sync(0) },
		"DestroyStream": func() error { return c.DestroyStream(1) },
		"NewEvent":      func() error { _, err := c.NewEvent(); return err },
		"Record":        func() error { return c.Record(1, 0) },
		"Elapsed":       func() error { _, err := c.Elapsed(1, 2); return err },
		"EventSync":     func() error { return c.EventSync(1) },
		"DestroyEvent":  func() error { return c.DestroyEvent(1) },
		"BeginCapture":  func() error { return c.BeginCapture(1) },
		"EndCapture":    func() error { _, err := c.EndCapture(1); return err },
		"Instantiate":   func() error { _, err := c.Instantiate(1); return err },
		"GraphLaunch":   func() error { return c.GraphLaunch(1, 1) },
		"DestroyGraph":  func() error { return c.DestroyGraph(1) },
		"DestroyExec":   func() error { return c.DestroyGraphExec(1) },
		"Synchronize":   func() error { return c.Synchronize() },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, errOutsideDo) {
			t.Errorf("%s outside Do: %v, want errOutsideDo", name, err)
		}
	}
}

// Argument checks that need no driver run before it is called; inside Do on
// the test device (which has no driver functions) they must fail cleanly.
func TestCtxChecksArgumentsBeforeCallingTheDriver(t *testing.T) {
	d := startTestDevice(t)
	buf := make([]float32, 4)
	for name, call := range map[string]func(c *Ctx) error{
		"Alloc(0)":            func(c *Ctx) error { _, err := c.Alloc(0); return err },
		"Alloc(-1)":           func(c *Ctx) error { _, err := c.Alloc(-1); return err },
		"HtoD nil":            func(c *Ctx) error { return c.HtoD(1, nil, 16) },
		"HtoD negative":       func(c *Ctx) error { return c.HtoD(1, unsafe.Pointer(&buf[0]), -1) },
		"DtoD negative":       func(c *Ctx) error { return c.DtoD(1, 2, -4) },
		"MemsetD32 negative":  func(c *Ctx) error { return c.MemsetD32Async(1, 0, -1, 0) },
		"Upload pointers":     func(c *Ctx) error { return Upload(c, 1, []*float32{&buf[0]}) },
		"Download pointers":   func(c *Ctx) error { return Download(c, []string{"x"}, 1) },
		"LoadModule empty":    func(c *Ctx) error { _, err := c.LoadModule(nil); return err },
		"Launch nil function": func(c *Ctx) error { return c.Launch(0, Dim3{1, 1, 1}, Dim3{1, 1, 1}, 0, 0) },
		"Launch zero grid":    func(c *Ctx) error { return c.Launch(1, Dim3{0, 1, 1}, Dim3{1, 1, 1}, 0, 0) },
		"Launch zero block":   func(c *Ctx) error { return c.Launch(1, Dim3{1, 1, 1}, Dim3{32, 0, 1}, 0, 0) },
		"Launch shared < 0":   func(c *Ctx) error { return c.Launch(1, Dim3{1, 1, 1}, Dim3{1, 1, 1}, -1, 0) },
		"Launch int arg":      func(c *Ctx) error { return c.Launch(1, Dim3{1, 1, 1}, Dim3{1, 1, 1}, 0, 0, DevPtr(1), 5) },
		"SetMaxShared < 0":    func(c *Ctx) error { return c.SetMaxDynamicShared(1, -1) },
		"LaunchDependent zero grid": func(c *Ctx) error {
			return c.LaunchDependent(1, Dim3{0, 1, 1}, Dim3{1, 1, 1}, 0, 0)
		},
		"LaunchDependent without cuLaunchKernelEx": func(c *Ctx) error {
			return c.LaunchDependent(1, Dim3{1, 1, 1}, Dim3{1, 1, 1}, 0, 0)
		},
	} {
		if err := d.Do(call); err == nil || strings.Contains(err.Error(), "panic") {
			t.Errorf("%s: %v; want an argument error", name, err)
		}
	}
	if err := d.Do(func(c *Ctx) error {
		if err := c.HtoD(1, nil, 0); err != nil {
			return err
		}
		return Upload(c, 1, []float32{})
	}); err != nil {
		t.Errorf("empty copies: %v; want no-ops", err)
	}
	if _, err := (&Module{}).Function("k"); err == nil {
		t.Error("Function on a nil module succeeded")
	}
}
