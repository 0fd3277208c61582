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
	a, b cuda.Event
	ms   map[string]float64
}

// NewClock creates a clock's two events. Call inside Do; Destroy frees
// them.
func NewClock(c *cuda.Ctx) (*Clock, error) {
	k := &Clock{ms: map[string]float64{}}
	var err error
	if k.a, err = c.NewEvent(); err != nil {
		return nil, err
	}
	if k.b, err = c.NewEvent(); err != nil {
		_ = c.DestroyEvent(k.a)
		return nil, err
	}
	return k, nil
}

// Destroy frees the clock's events.
func (k *Clock) Destroy(c *cuda.Ctx) error {
	_ = c.DestroyEvent(k.a)
	return c.DestroyEvent(k.b)
}

// Ms is the device time of phase so far, in milliseconds.
func (k *Clock) Ms(phase string) float64 { return k.ms[phase] }

// Begin records the start of a phase on stream s.
func (k *Clock) Begin(c *cuda.Ctx, s cuda.Stream) error {
	if k == nil {
		return nil
	}
	return c.Record(k.a, s)
}

// End records the end of a phase on s, waits for it and adds its time
// to phase.
func (k *Clock) End(c *cuda.Ctx, s cuda.Stream, phase string) error {
	if k == nil {
		return nil
	}
	if err := c.Record(k.b, s); err != nil {
		return err
	}
	if err := c.EventSync(k.b); err != nil {
		return err
	}
	ms, err := c.Elapsed(k.a, k.b)
	k.ms[phase] += float64(ms)
	return err
}
