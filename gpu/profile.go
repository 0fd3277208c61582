package gpu

import (
	"fmt"
	"github.com/dqnflow/dqnflow/gpu/device"

	"github.com/dqnflow/dqnflow/gpu/cuda"
	"github.com/dqnflow/dqnflow/trainer/model"
)

// KernelTime is the device time of one launch of the training step: reps
// copies of the launch captured in one CUDA graph, timed with CUDA events
// around the graph's replay, so host launch overhead is not counted, as
// inside the training graph.
type KernelTime struct {
	Index int     `json:"index"`
	Name  string  `json:"name"`
	Us    float64 `json:"us"`
	Grid  string  `json:"grid"`
}

// ProfileStep times every launch of the training step on its own (mean of
// reps graph-captured launches), so the report shows where a step's time
// goes. The launches change the trainer's state like training does.
func (t *Trainer) ProfileStep(reps int) ([]KernelTime, error) {
	return t.profile(reps, func(c *cuda.Ctx) ([]device.Launch, error) {
		p, err := t.l.Plan(c, t.cfg.BatchSize)
		if err != nil {
			return nil, err
		}
		return t.l.TrainLaunches(p), nil
	})
}

// ProfileStepInSitu times every launch of the training step where it runs
// in the step, after the launches before it: for each k, the graph of the
// step's first k launches (one after the other, the priority update last
// instead of beside AdamW) is replayed reps times between CUDA events, and
// launch k's time is the difference of the means with and without it. It
// so counts what ProfileStep's repeated launches of one kernel hide: the
// caches as the previous kernel leaves them, the ramp and the tail of each
// grid. The launches change the trainer's state like training does.
func (t *Trainer) ProfileStepInSitu(reps int) ([]KernelTime, error) {
	var out []KernelTime
	err := t.b.d.Dev.Do(func(c *cuda.Ctx) error {
		p, err := t.l.Plan(c, t.cfg.BatchSize)
		if err != nil {
			return err
		}
		ls := t.l.TrainLaunches(p)
		a, b := t.events[0], t.events[1]
		prev := 0.0
		for k := 1; k <= len(ls); k++ {
			x, err := device.Capture(c, t.l.S.Launch.Dependent, t.l.Stream, ls[:k])
			if err != nil {
				return fmt.Errorf("profile in situ, first %d launches: %w", k, err)
			}
			ms, err := timeReplays(c, t.l.Stream, x, a, b, reps)
			if derr := c.DestroyGraphExec(x); err == nil {
				err = derr
			}
			if err != nil {
				return err
			}
			us := 1000 * float64(ms) / float64(reps)
			ln := ls[k-1]
			out = append(out, kernelTime(k-1, ln, us-prev))
			prev = us
		}
		return t.notAborted(c, "profile in situ")
	})
	return out, err
}

// ProfileCollect times every launch of one collector step the same way
// (observe, the four forward GEMMs, the greedy head, the environment step,
// the commit into replay). The launches change the collector's state; a
// trainer profiled so is for measuring only.
func (t *Trainer) ProfileCollect(reps int) ([]KernelTime, error) {
	if t.col == nil {
		return nil, fmt.Errorf("profile collect: the trainer has no device collector")
	}
	return t.profile(reps, func(*cuda.Ctx) ([]device.Launch, error) { return t.col.Launches(), nil })
}

// profile times each launch that launches returns (ProfileStep).
func (t *Trainer) profile(reps int, launches func(*cuda.Ctx) ([]device.Launch, error)) ([]KernelTime, error) {
	var out []KernelTime
	err := t.b.d.Dev.Do(func(c *cuda.Ctx) error {
		ls, err := launches(c)
		if err != nil {
			return err
		}
		a, b := t.events[0], t.events[1]
		for i, ln := range ls {
			x, err := captureRepeated(c, t.l.S.Launch.Dependent, t.l.Stream, ln, reps)
			if err != nil {
				return fmt.Errorf("profile %s: %w", ln.Name, err)
			}
			ms, err := timeReplays(c, t.l.Stream, x, a, b, 1)
			if derr := c.DestroyGraphExec(x); err == nil {
				err = derr
			}
			if err != nil {
				return err
			}
			out = append(out, kernelTime(i, ln, 1000*float64(ms)/float64(reps)))
		}
		return t.notAborted(c, "profile")
	})
	return out, err
}

// notAborted reads the step state after a profile (what names it) and
// fails if a step aborted, which would have made its timings those of
// kernels that return at once.
func (t *Trainer) notAborted(c *cuda.Ctx, what string) error {
	s, err := t.l.ReadState(c)
	if err != nil {
		return err
	}
	if s.Abort != 0 {
		return fmt.Errorf("%s: the step aborted (flag %d)", what, s.Abort)
	}
	return nil
}

// timeReplays replays x once to warm up, then reps times between events a
// and b, and returns the milliseconds between them (all reps).
func timeReplays(c *cuda.Ctx, s cuda.Stream, x cuda.GraphExec, a, b cuda.Event, reps int) (float32, error) {
	if err := c.GraphLaunch(x, s); err != nil {
		return 0, err
	}
	if err := c.Record(a, s); err != nil {
		return 0, err
	}
	for range reps {
		if err := c.GraphLaunch(x, s); err != nil {
			return 0, err
		}
	}
	if err := c.Record(b, s); err != nil {
		return 0, err
	}
	if err := c.EventSync(b); err != nil {
		return 0, err
	}
	return c.Elapsed(a, b)
}

// captureRepeated captures reps launches of ln on stream s as one graph,
// each a programmatic dependent of the one before when dependent is set,
// as in the training graph.
func captureRepeated(c *cuda.Ctx, dependent bool, s cuda.Stream, ln device.Launch, reps int) (cuda.GraphExec, error) {
	ls := make([]device.Launch, reps)
	for i := range ls {
		ls[i] = ln
	}
	return device.Capture(c, dependent, s, ls)
}

// kernelTime is the report of launch ln, the index-th of its list, at us
// microseconds.
func kernelTime(index int, ln device.Launch, us float64) KernelTime {
	return KernelTime{Index: index, Name: ln.Name, Us: us,
		Grid: fmt.Sprintf("%dx%dx%d/%d", ln.Grid.X, ln.Grid.Y, ln.Grid.Z, ln.Block.X)}
}

// GEMMFlops is the floating-point work of the GEMMs of one training step at
// batch n: the online forward over 2n rows and the target's over n, then
// for the n rows at s the input gradients (all layers but s1) and the
// weight gradients (all layers), each 2·rows·in·out.
func GEMMFlops(lay [model.NumLayers]model.Layer, n int) float64 {
	var io, ioS1 float64
	for i, l := range lay {
		io += float64(l.In * l.Out)
		if i == model.LayerS1 {
			ioS1 = float64(l.In * l.Out)
		}
	}
	fwd := 2 * io * float64(3*n)
	bwd := 2 * float64(n) * (2*io - ioS1)
	return fwd + bwd
}

// ForwardPath says how the trainer's forward pass runs: "layered" (four
// gemm launches), and after a comma the GEMM path where its products run
// on wgmma.
func (t *Trainer) ForwardPath() string {
	if t.l.K.WGMMA {
		if !t.l.BF16 {
			return "layered, " + t.l.S.WGMMA.Desc + ", 3xTF32"
		}
		return "layered, " + t.l.S.WGMMA.Desc
	}
	return "layered"
}

// Launches says how the kernels of the trainer's CUDA graphs follow each
// other: "programmatic dependent", or "serial: " and why
// (dependentLaunches).
func (t *Trainer) Launches() string { return t.l.S.Launch.Desc }

// StepsPerGraph is how many training steps one launch of the training
// graph replays (Tuning.StepsPerGraph, default 8: ADR 0027).
func (t *Trainer) StepsPerGraph() int { return t.l.S.StepsPerGraph }
