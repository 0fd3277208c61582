package gpu

import (
	"context"
	"fmt"
	"github.com/dqnflow/dqnflow/gpu/device"
	"time"

	"github.com/dqnflow/dqnflow/gpu/cuda"
)

// EpochTiming is the mean time of one epoch and of each of its phases,
// wall and device, over the timed epochs.
type EpochTiming struct {
	Epochs       int     `json:"epochs"`
	EnvSteps     int     `json:"env_steps"`     // per epoch, all environments
	TrainSteps   int     `json:"train_steps"`   // per epoch
	BatchSize    int     `json:"batch_size"`    // per train step
	BacktestBars int     `json:"backtest_bars"` // the validation range
	EpochMs      float64 `json:"epoch_ms"`      // wall: collect + train + sync + backtest
	// Per phase, wall (host) time in milliseconds.
	CollectMs  float64 `json:"collect_ms"`
	TrainMs    float64 `json:"train_ms"`
	SyncMs     float64 `json:"sync_ms"`
	BacktestMs float64 `json:"backtest_ms"`
	// Per phase, device time: the span between CUDA events recorded
	// before the phase's first launch and after its last (collect,
	// backtest), or around the whole call (train, sync: their host tails,
	// a few microseconds, count as busy).
	CollectDeviceMs  float64 `json:"collect_device_ms"`
	TrainDeviceMs    float64 `json:"train_device_ms"`
	SyncDeviceMs     float64 `json:"sync_device_ms"`
	BacktestDeviceMs float64 `json:"backtest_device_ms"`
	// BacktestMode is how the backtest ran: "batch" (the host's accounting,
	// the device network deciding many observations per call) or "kernel"
	// (DQNFLOW_BACKTEST=kernel: one kernel walks the range bar by bar).
	// In batch mode BacktestCalls and BacktestRows are the calls of the
	// network and the observations they decided, mean per timed epoch,
	// and BacktestCallsMax the most calls one epoch made.
	BacktestMode     string  `json:"backtest_mode"`
	BacktestCalls    float64 `json:"backtest_calls,omitempty"`
	BacktestRows     float64 `json:"backtest_rows,omitempty"`
	BacktestCallsMax int     `json:"backtest_calls_max,omitempty"`
	// BusyFraction is the device time over the wall time of the epoch.
	BusyFraction float64 `json:"gpu_busy_fraction"`
}

// TimeEpochs runs one untimed epoch (graph capture, caches, replay
// warm-up), then epochs timed epochs of the run's config: Collect
// env.collect_steps, Train steps_per_epoch, SyncTarget, Backtest of the
// validation range. The trainer's state advances as in training.
func (t *Trainer) TimeEpochs(ctx context.Context, epochs int) (EpochTiming, error) {
	out := EpochTiming{Epochs: epochs, EnvSteps: t.cfg.Env.CollectSteps * t.cfg.Env.NumEnvs, TrainSteps: t.cfg.StepsPerEpoch,
		BatchSize: t.cfg.BatchSize, BacktestBars: t.ds.Valid.Len()}
	if epochs < 1 {
		return out, fmt.Errorf("time epochs: %d epochs: need at least 1", epochs)
	}
	if err := t.usable(); err != nil {
		return out, err
	}
	clock, err := t.newClock()
	if err != nil {
		return out, err
	}
	defer t.do(clock.Destroy)
	wall := map[string]float64{}
	// around times a whole call on the device (train, sync).
	around := func(phase string, f func() error) error {
		if err := t.do(func(c *cuda.Ctx) error { return clock.Begin(c, t.l.Stream) }); err != nil {
			return err
		}
		if err := f(); err != nil {
			return err
		}
		return t.do(func(c *cuda.Ctx) error { return clock.End(c, t.l.Stream, phase) })
	}
	for e := 0; e <= epochs; e++ {
		timed := e > 0
		if timed {
			t.col.Clock, t.bt.Clock = clock, clock
		}
		phases := []struct {
			name string
			f    func() error
		}{
			{"collect", func() error { _, err := t.Collect(ctx, t.cfg.Env.CollectSteps); return err }},
			{"train", func() error {
				f := func() error { _, err := t.Train(ctx, t.cfg.StepsPerEpoch, nil); return err }
				if !timed {
					return f()
				}
				return around("train", f)
			}},
			{"sync", func() error {
				if !timed {
					return t.SyncTarget()
				}
				return around("sync", t.SyncTarget)
			}},
			{"backtest", func() error { _, err := t.Backtest(ctx, t.ds, t.ds.Valid); return err }},
		}
		for _, p := range phases {
			t0 := time.Now()
			if err := p.f(); err != nil {
				t.col.Clock, t.bt.Clock = nil, nil
				return out, fmt.Errorf("time epochs: %s: %w", p.name, err)
			}
			if timed {
				wall[p.name] += float64(time.Since(t0).Microseconds()) / 1000
				if p.name == "backtest" && !t.bt.Kernel {
					st := t.bt.LastStats
					out.BacktestCalls += float64(st.Rounds) / float64(epochs)
					out.BacktestRows += float64(st.Evaluated) / float64(epochs)
					out.BacktestCallsMax = max(out.BacktestCallsMax, st.Rounds)
				}
			}
		}
	}
	t.col.Clock, t.bt.Clock = nil, nil
	out.BacktestMode = "batch"
	if t.bt.Kernel {
		out.BacktestMode = "kernel"
	}
	n := float64(epochs)
	out.CollectMs, out.TrainMs, out.SyncMs, out.BacktestMs = wall["collect"]/n, wall["train"]/n, wall["sync"]/n, wall["backtest"]/n
	out.CollectDeviceMs, out.TrainDeviceMs = clock.Ms("collect")/n, clock.Ms("train")/n
	out.SyncDeviceMs, out.BacktestDeviceMs = clock.Ms("sync")/n, clock.Ms("backtest")/n
	out.EpochMs = out.CollectMs + out.TrainMs + out.SyncMs + out.BacktestMs
	if out.EpochMs > 0 {
		out.BusyFraction = (out.CollectDeviceMs + out.TrainDeviceMs + out.SyncDeviceMs + out.BacktestDeviceMs) / out.EpochMs
	}
	return out, nil
}

// CollectThroughput is the collector's speed over one Collect call.
type CollectThroughput struct {
	NumEnvs int `json:"num_envs"`
	Steps   int `json:"steps"` // collector steps of the timed call
	// EnvStepsPerS is environment steps per second of wall time: policy
	// inference (forward pass and greedy head), ε-greedy draws, the
	// environment, n-step returns and replay writes, tree rebuild and the
	// counters' read-back included.
	EnvStepsPerS float64 `json:"env_steps_per_s"`
	// DeviceEnvStepsPerS is the same over the device time of the call.
	DeviceEnvStepsPerS float64 `json:"device_env_steps_per_s"`
}

// TimeCollect times Collect(steps) after one untimed step (graph capture).
func (t *Trainer) TimeCollect(ctx context.Context, steps int) (CollectThroughput, error) {
	out := CollectThroughput{NumEnvs: t.cfg.Env.NumEnvs, Steps: steps}
	if steps < 1 {
		return out, fmt.Errorf("time collect: %d steps: need at least 1", steps)
	}
	if _, err := t.Collect(ctx, 1); err != nil {
		return out, err
	}
	clock, err := t.newClock()
	if err != nil {
		return out, err
	}
	defer t.do(clock.Destroy)
	t.col.Clock = clock
	t0 := time.Now()
	_, err = t.Collect(ctx, steps)
	sec := time.Since(t0).Seconds()
	t.col.Clock = nil
	if err != nil {
		return out, err
	}
	envSteps := float64(steps * t.cfg.Env.NumEnvs)
	out.EnvStepsPerS = envSteps / sec
	if ms := clock.Ms("collect"); ms > 0 {
		out.DeviceEnvStepsPerS = envSteps / (ms / 1000)
	}
	return out, nil
}

// newClock is a device clock on the trainer's device (device.Clock).
func (t *Trainer) newClock() (*device.Clock, error) {
	var clock *device.Clock
	err := t.do(func(c *cuda.Ctx) error {
		var err error
		clock, err = device.NewClock(c)
		return err
	})
	return clock, err
}
