package cuda

import (
	"fmt"
	"runtime"
	"testing"
)

// BenchmarkGPUPhaseFloor measures the floor under a training step made of
// dependent phases, whatever the phases compute: a phase in which every
// block (one per SM, 256 threads) reads what another block wrote in the
// phase before and writes for the next, with 4 bytes or 4 KB a block (a
// layer's activations and weights at batch 256 come to about 4 KB a block
// on 132 SMs). Three ways to chain 48 such phases:
//
//   - serial: a kernel a phase, captured as one graph, each launched after
//     the one before ends;
//   - dependent: the same kernels as programmatic dependents (ADR 0019), as
//     the trainer's step graph launches them;
//   - persistent: one cooperative kernel, a grid barrier after each phase
//     (the design a whole-step kernel would have).
//
// It reports us/phase; the data each block ends with is checked, so a
// barrier that let a block through early fails the benchmark.
//
//	DQNFLOW_REQUIRE_GPU=1 ./cuda.test -test.run '^$' -test.bench PhaseFloor -test.benchtime 200x
func BenchmarkGPUPhaseFloor(b *testing.B) {
	d := testDevice(b)
	m := testModule(b, d, phaseSource, "phase.cu")
	link, persist := testFunction(b, m, "phase_link"), testFunction(b, m, "phase_persist")
	blocks := d.Info().SMs
	const phases = 48
	for _, words := range []int{1, 1024} {
		for _, how := range []string{"serial", "dependent", "persistent"} {
			b.Run(fmt.Sprintf("bytes=%d/%s", 4*words, how), func(b *testing.B) {
				err := d.Do(func(c *Ctx) error {
					return phaseFloor(b, c, how, link, persist, blocks, words, phases)
				})
				if err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

func phaseFloor(b *testing.B, c *Ctx, how string, link, persist Function, blocks, words, phases int) error {
	n := blocks * words
	init := make([]float32, n)
	for i := range init {
		init[i] = float32(i % 1000)
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
	bar, err := c.Alloc(4 * 64)
	if err != nil {
		return err
	}
	defer c.Free(bar)
	if err := c.MemsetD32Async(bar, 0, 64, 0); err != nil {
		return err
	}
	if err := Upload(c, buf[0], init); err != nil {
		return err
	}
	s, err := c.NewStream()
	if err != nil {
		return err
	}
	defer c.DestroyStream(s)
	grid := Dim3{uint32(blocks), 1, 1}
	if how != "serial" && !c.CanLaunchDependent() {
		return fmt.Errorf("%s: the driver has no cuLaunchKernelEx", how)
	}
	// b.N + 1 runs of the chain; the first (a warm-up) is not timed.
	b.ResetTimer()
	var us float64
	switch how {
	case "persistent":
		us, err = timeRuns(c, s, b.N+1, func() error {
			return launchCooperative(c, persist, grid, block256, s, buf[0], buf[1], int32(words), int32(phases), bar)
		})
	case "serial", "dependent":
		launch := c.Launch
		if how == "dependent" {
			launch = c.LaunchDependent
		}
		us, err = replayGraph(c, s, b.N+1, func() error {
			for i := range phases {
				if err := launch(link, grid, block256, 0, s, buf[i%2], buf[(i+1)%2], int32(words)); err != nil {
					return fmt.Errorf("launch %d: %w", i, err)
				}
			}
			return nil
		})
	default:
		return fmt.Errorf("no way %q", how)
	}
	b.StopTimer()
	if err != nil {
		return err
	}
	b.ReportMetric(us/float64(phases), "us/phase")
	// phases is even, so every launch ends in buf[0]: after k phases block
	// j's slice holds block (j+k) mod blocks's first slice, plus k.
	got := make([]float32, n)
	if err := Download(c, got, buf[0]); err != nil {
		return err
	}
	k := (b.N + 1) * phases
	for j := range blocks {
		src := (j + k) % blocks
		for i := range words {
			if want := init[src*words+i] + float32(k); got[j*words+i] != want {
				return fmt.Errorf("%s: block %d word %d = %v after %d phases, want %v", how, j, i, got[j*words+i], k, want)
			}
		}
	}
	return nil
}

// CU_LAUNCH_ATTRIBUTE_COOPERATIVE (cuda.h).
const launchAttrCooperative = 2

// launchCooperative queues f on s as a cooperative launch (cuLaunchKernelEx
// with the cooperative attribute): the driver refuses it unless every block
// can be resident at once, which a grid barrier needs.
func launchCooperative(c *Ctx, f Function, grid, block Dim3, s Stream, args ...any) error {
	k, err := c.launchArgs("launchCooperative", f, grid, block, 0, args)
	if err != nil {
		return err
	}
	attr := &launchAttr{id: launchAttrCooperative}
	attr.value[0] = 1
	cfg := &launchConfig{gridX: grid.X, gridY: grid.Y, gridZ: grid.Z, blockX: block.X, blockY: block.Y, blockZ: block.Z,
		stream: s, attrs: attr, numAttrs: 1}
	r := c.api.cuLaunchKernelEx(cfg, f, k.params(), nil)
	runtime.KeepAlive(k)
	runtime.KeepAlive(cfg)
	runtime.KeepAlive(attr)
	return c.api.check("cuLaunchKernelEx", r)
}
