package cuda

// GPU smoke tests. They skip with the reason on a machine without an NVIDIA
// driver or device; with DQNFLOW_REQUIRE_GPU=1 (the device script sets it)
// they fail instead. Build them into a static binary for the GPU host with
//
//	CGO_ENABLED=0 go test -c -o bin/gputest/cuda.test ./gpu/cuda
//	DQNFLOW_REQUIRE_GPU=1 ./cuda.test -test.run GPU -test.v

import (
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"strings"
	"testing"
	"unsafe"
)

func requireGPU() bool { return os.Getenv("DQNFLOW_REQUIRE_GPU") == "1" }

// testDevice opens device 0 for the test and closes it after.
func testDevice(t testing.TB) *Device {
	t.Helper()
	devs, err := Devices()
	switch {
	case err != nil && errors.Is(err, ErrNoDriver) && !requireGPU():
		t.Skipf("no NVIDIA driver on this machine: %v", err)
	case err != nil:
		t.Fatalf("Devices: %v", err)
	case len(devs) == 0 && !requireGPU():
		t.Skip("the NVIDIA driver loads but finds no CUDA device")
	case len(devs) == 0:
		t.Fatal("DQNFLOW_REQUIRE_GPU=1 but the driver finds no CUDA device")
	}
	d, err := Open(0)
	if err != nil {
		t.Fatalf("Open(0): %v", err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return d
}

// testModule compiles src for the device's architecture and loads it.
func testModule(t testing.TB, d *Device, src, name string) *Module {
	t.Helper()
	c, err := NewCompiler()
	if err != nil {
		t.Fatalf("NVRTC is needed to compile the test kernels: %v", err)
	}
	info := d.Info()
	cubin, err := c.CompileCached(t.TempDir(), src, name, info.Major*10+info.Minor)
	if err != nil {
		t.Fatal(err)
	}
	var m *Module
	if err := d.Do(func(c *Ctx) error {
		var err error
		m, err = c.LoadModule(cubin)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return m
}

func testFunction(t testing.TB, m *Module, name string) Function {
	t.Helper()
	f, err := m.Function(name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// blocks is the grid size covering n threads in blocks of 256.
func blocks(n int) Dim3 { return Dim3{uint32((n + 255) / 256), 1, 1} }

var block256 = Dim3{256, 1, 1}

func TestGPUDeviceInfo(t *testing.T) {
	d := testDevice(t)
	devs, err := Devices()
	if err != nil {
		t.Fatal(err)
	}
	info := d.Info()
	if info != devs[0] {
		t.Errorf("Info() = %+v, Devices()[0] = %+v", info, devs[0])
	}
	if info.Name == "" || info.TotalMem == 0 || info.Major < 5 || info.SMs <= 0 {
		t.Errorf("implausible device info %+v", info)
	}
	if !regexp.MustCompile(`^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`).MatchString(info.UUID) {
		t.Errorf("UUID %q is not in nvidia-smi's form", info.UUID)
	}
	v, err := DriverVersion()
	if err != nil || v < 11040 {
		t.Errorf("DriverVersion = %d, %v; want ≥ 11040", v, err)
	}
	var free, total uint64
	if err := d.Do(func(c *Ctx) error {
		var err error
		free, total, err = c.MemGetInfo()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if free == 0 || free > total || total > info.TotalMem {
		t.Errorf("MemGetInfo free %d total %d, device total %d", free, total, info.TotalMem)
	}
	if _, err := Open(len(devs)); err == nil || !strings.Contains(err.Error(), "ordinals 0 to") {
		t.Errorf("Open(%d) past the last device: %v", len(devs), err)
	}
	t.Logf("%d device(s); device 0: %+v; driver %d; free %d of %d bytes", len(devs), info, v, free, total)
}

func TestGPUCopiesRoundTrip(t *testing.T) {
	d := testDevice(t)
	const n = 1<<20 + 3
	src := make([]float32, n)
	for i := range src {
		src[i] = float32(i)*0.25 - 1000
	}
	err := d.Do(func(c *Ctx) error {
		a, err := c.Alloc(4 * n)
		if err != nil {
			return err
		}
		defer c.Free(a)
		b, err := c.Alloc(4 * n)
		if err != nil {
			return err
		}
		defer c.Free(b)
		s, err := c.NewStream()
		if err != nil {
			return err
		}
		defer c.DestroyStream(s)

		// Synchronous: host → a → b → host.
		if err := Upload(c, a, src); err != nil {
			return err
		}
		if err := c.DtoD(b, a, 4*n); err != nil {
			return err
		}
		got := make([]float32, n)
		if err := Download(c, got, b); err != nil {
			return err
		}
		for i := range got {
			if got[i] != src[i] {
				t.Fatalf("sync round trip: element %d = %v, want %v", i, got[i], src[i])
			}
		}

		// Asynchronous on s, into page-locked memory: memsets then copies.
		if err := c.MemsetD32Async(b, math.Float32bits(7.5), n, s); err != nil {
			return err
		}
		if err := c.MemsetD8Async(b, 0, 4*10, s); err != nil { // first 10 floats to +0
			return err
		}
		if err := c.DtoDAsync(a, b, 4*n, s); err != nil {
			return err
		}
		pinned, err := c.AllocHost(4 * n)
		if err != nil {
			return err
		}
		defer c.FreeHost(pinned)
		if err := c.DtoHAsync(pinned, a, 4*n, s); err != nil {
			return err
		}
		if err := c.Sync(s); err != nil {
			return err
		}
		host := unsafe.Slice((*float32)(pinned), n)
		for i, v := range host {
			want := float32(7.5)
			if i < 10 {
				want = 0
			}
			if v != want {
				t.Fatalf("async round trip: element %d = %v, want %v", i, v, want)
			}
		}
		if err := c.HtoDAsync(a, unsafe.Pointer(&src[0]), 4*n, s); err != nil {
			return err
		}
		if err := c.Sync(s); err != nil {
			return err
		}
		clear(got)
		if err := Download(c, got, a); err != nil {
			return err
		}
		for i := range got {
			if got[i] != src[i] {
				t.Fatalf("HtoDAsync: element %d = %v, want %v", i, got[i], src[i])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestGPUSaxpyCompilesLoadsAndLaunches(t *testing.T) {
	d := testDevice(t)
	m := testModule(t, d, saxpySource, "saxpy.cu")
	saxpy := testFunction(t, m, "saxpy")
	if _, err := m.Function("no_such_kernel"); err == nil || !strings.Contains(err.Error(), `extern "C"`) {
		t.Errorf("Function of a missing kernel: %v; want a hint about extern \"C\"", err)
	}
	const n = 100_003 // not a multiple of the block
	x := make([]float32, n)
	y := make([]float32, n)
	for i := range x {
		x[i], y[i] = float32(i%1000), float32(3*(i%777))
	}
	got := make([]float32, n)
	err := d.Do(func(c *Ctx) error {
		dx, err := c.Alloc(4 * n)
		if err != nil {
			return err
		}
		defer c.Free(dx)
		dy, err := c.Alloc(4 * n)
		if err != nil {
			return err
		}
		defer c.Free(dy)
		if err := Upload(c, dx, x); err != nil {
			return err
		}
		if err := Upload(c, dy, y); err != nil {
			return err
		}
		if err := c.Launch(saxpy, blocks(n), block256, 0, 0, float32(2), dx, dy, int32(n)); err != nil {
			return err
		}
		if err := c.Synchronize(); err != nil {
			return err
		}
		return Download(c, got, dy)
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		// Small integers: exact in f32 with or without a fused multiply-add.
		if want := 2*x[i] + y[i]; got[i] != want {
			t.Fatalf("y[%d] = %v, want %v", i, got[i], want)
		}
	}
}

func TestGPUEventsTimeKernels(t *testing.T) {
	d := testDevice(t)
	m := testModule(t, d, saxpySource, "saxpy.cu")
	saxpy := testFunction(t, m, "saxpy")
	const n, launches = 1 << 20, 100
	err := d.Do(func(c *Ctx) error {
		dx, err := c.Alloc(4 * n)
		if err != nil {
			return err
		}
		defer c.Free(dx)
		if err := c.MemsetD32Async(dx, 0, n, 0); err != nil {
			return err
		}
		s, err := c.NewStream()
		if err != nil {
			return err
		}
		defer c.DestroyStream(s)
		start, err := c.NewEvent()
		if err != nil {
			return err
		}
		defer c.DestroyEvent(start)
		end, err := c.NewEvent()
		if err != nil {
			return err
		}
		defer c.DestroyEvent(end)
		if err := c.Synchronize(); err != nil {
			return err
		}
		if err := c.Record(start, s); err != nil {
			return err
		}
		for range launches {
			if err := c.Launch(saxpy, blocks(n), block256, 0, s, float32(1), dx, dx, int32(n)); err != nil {
				return err
			}
		}
		if err := c.Record(end, s); err != nil {
			return err
		}
		if err := c.EventSync(end); err != nil {
			return err
		}
		ms, err := c.Elapsed(start, end)
		if err != nil {
			return err
		}
		if !(ms > 0 && ms < 10_000) {
			t.Errorf("%d launches took %v ms by the events", launches, ms)
		}
		t.Logf("%d saxpy launches of %d floats: %.3f ms, %.2f µs each", launches, n, ms, 1000*ms/launches)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A graph of 40 dependent kernels, captured once and replayed: nothing runs
// during the capture, and every replay runs all 40 (DESIGN.md §6 measured
// about 1 µs per node on the H200).
func TestGPUGraphOf40KernelsReplays(t *testing.T) {
	d := testDevice(t)
	m := testModule(t, d, saxpySource, "saxpy.cu")
	addOne := testFunction(t, m, "add_one")
	const n, nodes, replays = 4096, 40, 25
	err := d.Do(func(c *Ctx) error {
		x, err := c.Alloc(4 * n)
		if err != nil {
			return err
		}
		defer c.Free(x)
		s, err := c.NewStream()
		if err != nil {
			return err
		}
		defer c.DestroyStream(s)
		if err := c.MemsetD32Async(x, 0, n, s); err != nil {
			return err
		}
		if err := c.Sync(s); err != nil {
			return err
		}

		if err := c.BeginCapture(s); err != nil {
			return err
		}
		for i := range nodes {
			if err := c.Launch(addOne, blocks(n), block256, 0, s, x, int32(n)); err != nil {
				c.EndCapture(s) // leave the stream usable; the launch error is the one to report
				return fmt.Errorf("launch %d during capture: %w", i, err)
			}
		}
		g, err := c.EndCapture(s)
		if err != nil {
			return err
		}
		exec, err := c.Instantiate(g)
		if err != nil {
			return err
		}
		defer c.DestroyGraphExec(exec)
		if err := c.DestroyGraph(g); err != nil {
			return err
		}
		got := make([]float32, n)
		if err := Download(c, got, x); err != nil {
			return err
		}
		if got[0] != 0 || got[n-1] != 0 {
			t.Fatalf("capturing ran the kernels: x = %v … %v, want 0", got[0], got[n-1])
		}

		// The first replay, not timed, uploads the graph.
		us, err := timeRuns(c, s, replays, func() error { return c.GraphLaunch(exec, s) })
		if err != nil {
			return err
		}
		if err := Download(c, got, x); err != nil {
			return err
		}
		for i, v := range got {
			if v != nodes*replays {
				t.Fatalf("x[%d] = %v after %d replays of %d nodes, want %d", i, v, replays, nodes, nodes*replays)
			}
		}
		t.Logf("graph of %d kernels: %.1f µs per replay, %.2f µs per node", nodes, us, us/nodes)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// bf16RNE is the reference f32 → bf16 conversion, round to nearest even, for
// finite inputs and infinities.
func bf16RNE(f float32) uint16 {
	b := math.Float32bits(f)
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

func bf16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

func TestGPUBF16ConversionAndTensorCoreMMA(t *testing.T) {
	d := testDevice(t)
	if d.Info().Major < 8 {
		t.Skipf("bf16 mma needs compute capability 8.0, the device has %d.%d", d.Info().Major, d.Info().Minor)
	}
	m := testModule(t, d, bf16MMASource, "mma_bf16.cu")
	toBF16 := testFunction(t, m, "to_bf16")
	mma := testFunction(t, m, "mma_bf16_16x8x16")

	// Conversion: ties both ways, values near 1, large, tiny normal, overflow.
	xs := []float32{0, 1, -1, 1.00390625, 1.01171875, 1.0078125, 3.14159265, -2.718281828,
		65504, 1e-30, -1e30, 3.3e38, math.Float32frombits(0x3f808000), math.Float32frombits(0x3f818000),
		float32(math.Inf(1)), float32(math.Inf(-1))}
	for i := range 1000 {
		xs = append(xs, math.Float32frombits(uint32(0x3a000000+i*0x0004_2b17)))
	}
	gotBF16 := make([]uint16, len(xs))

	// MMA: values that are multiples of 0.5 in [-4, 4] are exact in bf16, and
	// so are their products and sums of 16 in f32: the result must be exact.
	a := make([]float32, 16*16) // row-major (m, k)
	b := make([]float32, 8*16)  // column-major: (k, n) at n*16+k
	for i := range a {
		a[i] = float32((i*7)%17-8) * 0.5
	}
	for i := range b {
		b[i] = float32((i*5)%13-6) * 0.5
	}
	gotD := make([]float32, 16*8)
	err := d.Do(func(c *Ctx) error {
		dx, err := c.Alloc(4 * len(xs))
		if err != nil {
			return err
		}
		defer c.Free(dx)
		dy, err := c.Alloc(2 * len(xs))
		if err != nil {
			return err
		}
		defer c.Free(dy)
		if err := Upload(c, dx, xs); err != nil {
			return err
		}
		if err := c.Launch(toBF16, blocks(len(xs)), block256, 0, 0, dx, dy, int32(len(xs))); err != nil {
			return err
		}
		if err := Download(c, gotBF16, dy); err != nil {
			return err
		}
		da, err := c.Alloc(4 * len(a))
		if err != nil {
			return err
		}
		defer c.Free(da)
		db, err := c.Alloc(4 * len(b))
		if err != nil {
			return err
		}
		defer c.Free(db)
		dd, err := c.Alloc(4 * len(gotD))
		if err != nil {
			return err
		}
		defer c.Free(dd)
		if err := Upload(c, da, a); err != nil {
			return err
		}
		if err := Upload(c, db, b); err != nil {
			return err
		}
		if err := c.Launch(mma, Dim3{1, 1, 1}, Dim3{32, 1, 1}, 0, 0, da, db, dd); err != nil {
			return err
		}
		return Download(c, gotD, dd)
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range xs {
		if want := bf16RNE(x); gotBF16[i] != want {
			t.Errorf("cvt.rn.bf16.f32(%g = %#08x) = %#04x, want %#04x", x, math.Float32bits(x), gotBF16[i], want)
		}
	}
	for r := range 16 {
		for col := range 8 {
			var want float64
			for k := range 16 {
				want += float64(bf16ToF32(bf16RNE(a[r*16+k]))) * float64(bf16ToF32(bf16RNE(b[col*16+k])))
			}
			if got := gotD[r*8+col]; float64(got) != want {
				t.Errorf("D[%d][%d] = %v, want %v", r, col, got, want)
			}
		}
	}
}

// Every failing call is an *Error naming it, and a failed call that is not
// sticky leaves the context usable.
func TestGPUErrorsNameTheCall(t *testing.T) {
	d := testDevice(t)
	m := testModule(t, d, saxpySource, "saxpy.cu")
	addOne := testFunction(t, m, "add_one")
	err := d.Do(func(c *Ctx) error {
		for _, tc := range []struct {
			call string
			err  error
		}{
			{"cuMemFree_v2", c.Free(DevPtr(0xdead_0000))},
			{"cuLaunchKernel", c.Launch(addOne, Dim3{1, 1, 1}, Dim3{4096, 1, 1}, 0, 0, DevPtr(0), int32(0))},
			{"cuModuleLoadData", func() error { _, err := c.LoadModule([]byte("this is not PTX")); return err }()},
			{"cuMemAlloc_v2", func() error { _, err := c.Alloc(1 << 62); return err }()},
		} {
			var ce *Error
			if !errors.As(tc.err, &ce) || ce.Call != tc.call || !strings.HasPrefix(ce.Name, "CUDA_ERROR_") || ce.Msg == "" {
				t.Errorf("%s: error %v (%#v), want an *Error naming the call, status and description", tc.call, tc.err, ce)
				continue
			}
			t.Logf("%v", tc.err)
		}
		return c.Synchronize()
	})
	if err != nil {
		t.Fatalf("the context is unusable after non-sticky errors: %v", err)
	}
}

// Kernels launched as programmatic dependents (LaunchDependent) inside a
// captured graph still run in order: each of 40 kernels reads what other
// blocks of the one before wrote, and the result is that of the kernels
// one after the other. The test also times the graph both ways.
func TestGPUDependentLaunchesKeepTheOrder(t *testing.T) {
	d := testDevice(t)
	m := testModule(t, d, saxpySource, "saxpy.cu")
	shift := testFunction(t, m, "shift_one")
	const n, nodes, replays = 1 << 18, 40, 25
	init := make([]float32, n)
	for i := range init {
		init[i] = float32(i)
	}
	// After k kernels, element i holds init[(i + k·4099) mod n] + k.
	want := func(i, k int) float32 { return float32((i+k*4099)%n + k) }
	err := d.Do(func(c *Ctx) error {
		if !c.CanLaunchDependent() {
			return fmt.Errorf("the driver has no cuLaunchKernelEx")
		}
		var buf [2]DevPtr
		for i := range buf {
			p, err := c.Alloc(4 * n)
			if err != nil {
				return err
			}
			defer c.Free(p)
			buf[i] = p
		}
		s, err := c.NewStream()
		if err != nil {
			return err
		}
		defer c.DestroyStream(s)
		for _, dependent := range []bool{false, true} {
			if err := Upload(c, buf[0], init); err != nil {
				return err
			}
			us, err := replayGraph(c, s, replays, func() error {
				for i := range nodes {
					src, dst := buf[i%2], buf[(i+1)%2]
					launch := c.Launch
					if dependent {
						launch = c.LaunchDependent
					}
					if err := launch(shift, blocks(n), block256, 0, s, src, dst, int32(n)); err != nil {
						return fmt.Errorf("launch %d: %w", i, err)
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
			got := make([]float32, n)
			if err := Download(c, got, buf[0]); err != nil { // an even number of kernels ends in buf[0]
				return err
			}
			for i, v := range got {
				if w := want(i, nodes*replays); v != w {
					t.Fatalf("dependent %v: x[%d] = %v after %d kernels, want %v", dependent, i, v, nodes*replays, w)
				}
			}
			t.Logf("dependent launches %v: %d kernels of %d blocks, %.2f µs per kernel", dependent, nodes, blocks(n).X, us/nodes)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// replayGraph captures what queue launches on s as one graph, replays it
// replays times and returns the µs per replay of all but the first.
func replayGraph(c *Ctx, s Stream, replays int, queue func() error) (float64, error) {
	if err := c.BeginCapture(s); err != nil {
		return 0, err
	}
	if err := queue(); err != nil {
		c.EndCapture(s) // leave the stream usable; the launch error is the one to report
		return 0, err
	}
	g, err := c.EndCapture(s)
	if err != nil {
		return 0, err
	}
	exec, err := c.Instantiate(g)
	if derr := c.DestroyGraph(g); err == nil {
		err = derr
	}
	if err != nil {
		return 0, err
	}
	defer c.DestroyGraphExec(exec)
	return timeRuns(c, s, replays, func() error { return c.GraphLaunch(exec, s) })
}

// timeRuns calls run runs times, each queueing work on s, and returns the
// µs of GPU time per run of all but the first (the first launch of a graph
// or kernel costs more), from events recorded on s.
func timeRuns(c *Ctx, s Stream, runs int, run func() error) (float64, error) {
	var ev [2]Event
	for i := range ev {
		var err error
		if ev[i], err = c.NewEvent(); err != nil {
			return 0, err
		}
		defer c.DestroyEvent(ev[i])
	}
	if err := run(); err != nil {
		return 0, err
	}
	if err := c.Record(ev[0], s); err != nil {
		return 0, err
	}
	for range runs - 1 {
		if err := run(); err != nil {
			return 0, err
		}
	}
	if err := c.Record(ev[1], s); err != nil {
		return 0, err
	}
	if err := c.Sync(s); err != nil {
		return 0, err
	}
	ms, err := c.Elapsed(ev[0], ev[1])
	return 1000 * float64(ms) / float64(runs-1), err
}
