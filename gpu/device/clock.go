package device

import (
	"github.com/dqnflow/dqnflow/gpu/cuda"
)

// Clock measures the device time of the trainer's phases with CUDA
// events recorded on the learner's stream around each phase's device work
// (the collector's graph replays, the backtest kernel), so host work in a
// phase (booking the backtest report, reading counters) is not counted.
// A nil clock records nothing.
type Clock struct {
	A, B cuda.Event
	MS   map[string]float64
}

func (k *Clock) Begin(c *cuda.Ctx, s cuda.Stream) error {
	if k == nil {
		return nil
	}
	return c.Record(k.A, s)
}

func (k *Clock) End(c *cuda.Ctx, s cuda.Stream, phase string) error {
	if k == nil {
		return nil
	}
	if err := c.Record(k.B, s); err != nil {
		return err
	}
	if err := c.EventSync(k.B); err != nil {
		return err
	}
	ms, err := c.Elapsed(k.A, k.B)
	k.MS[phase] += float64(ms)
	return err
}
