package device_test

import (
	"github.com/dqnflow/dqnflow/gpu/device"
	"github.com/dqnflow/dqnflow/gpu/internal/gputest"
	"testing"

	"github.com/dqnflow/dqnflow/gpu/cuda"
)

// spinSource keeps every SM busy for about the given clock cycles a block.
const spinSource = `
extern "C" __global__ void spin(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}
`

// TestUploadAfterAllocLandsOnABusyGPU: a buffer from arena.alloc followed
// at once by an upload holds the uploaded bytes, also when another stream
// keeps every SM busy. The arena zeroes on its non-blocking stream, which
// the synchronous upload (legacy default stream) does not wait for; when
// alloc returned before the zeroing ran, a busy GPU ran it after the
// upload and wiped it. Eight trainings sharing an H200 hit that
// (docs/perf/gpu-2026-12-05.md); this test builds the same order on one
// context: the spin kernel holds the SMs, so the zeroing waits behind it
// while the copy engine would land the upload.
func TestUploadAfterAllocLandsOnABusyGPU(t *testing.T) {
	d := gputest.Device(t)
	comp, err := cuda.NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	cubin, err := comp.CompileCached(t.TempDir(), spinSource, "spin.cu", d.Arch())
	if err != nil {
		t.Fatal(err)
	}
	const n = 1 << 16
	want := make([]float32, n)
	for i := range want {
		want[i] = float32(i + 1)
	}
	got := make([]float32, n)
	if err := d.Dev.Do(func(c *cuda.Ctx) error {
		busy, err := c.NewStream()
		if err != nil {
			return err
		}
		defer func() { _ = c.DestroyStream(busy) }()
		s, err := c.NewStream()
		if err != nil {
			return err
		}
		defer func() { _ = c.DestroyStream(s) }()
		mod, err := c.LoadModule(cubin)
		if err != nil {
			return err
		}
		f, err := mod.Function("spin")
		if err != nil {
			return err
		}
		// Several waves of full blocks, about 10 ms each at 2 GHz.
		grid := 8 * d.Info.SMs
		if err := c.Launch(f, cuda.Dim3{X: uint32(grid), Y: 1, Z: 1}, cuda.Dim3{X: 1024, Y: 1, Z: 1}, 0, busy, int64(20_000_000)); err != nil {
			return err
		}
		var a device.Arena
		defer func() { _ = a.Free(c) }()
		p, err := a.Alloc(c, s, 4*n)
		if err != nil {
			return err
		}
		if err := cuda.Upload(c, p, want); err != nil {
			return err
		}
		if err := c.Synchronize(); err != nil {
			return err
		}
		return cuda.Download(c, got, p)
	}); err != nil {
		t.Fatal(err)
	}
	bad := 0
	for i := range got {
		if got[i] != want[i] {
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d uploaded values lost (first: %v, want %v)", bad, n, got[0], want[0])
	}
}
