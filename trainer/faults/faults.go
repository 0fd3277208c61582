// Package faults injects failures into a trainer backend and into the
// checkpoint writes of a worker, so that the fault-injection tests
// (`make chaos`, docs/reliability.md) can make a worker's stage last long
// enough to be killed in, its training diverge, its device fail, or hold a
// checkpoint write at an exact point for the test to kill the process
// there, in the real worker process. `dqnflow worker` wraps its backend
// and sets its checkpoint store's hook when the environment variable
// DQNFLOW_FAULTS is set (never by default), and says so in its log.
//
// A plan is a comma-separated list of:
//
//	delay:STAGE=DURATION   sleep before every call of STAGE: collect, train, sync, snapshot, backtest
//	nan-on-train=N         the Nth Train call in this process fails with trainer.ErrNonFinite
//	device-error-on-train=N the Nth Train call in this process fails with trainer.ErrDevice
//	device-error-on-train=N@DEVICE the same, counting only the calls on device DEVICE (cpu:1, cuda:0)
//	text=HEX[*N]           the injected errors quote these bytes (hex-encoded, repeated N times)
//	hold:POINT=N           the Nth checkpoint write of this process stops at POINT (checkpoint.WritePoint):
//	                       temp-synced (the temporary file complete and fsynced, before the rename) or
//	                       renamed (the file in place, before its metadata row is recorded)
//
// for example "delay:snapshot=2s,nan-on-train=3". Trainer calls are
// counted per device: a worker with several devices wraps each device's
// backend apart. Checkpoint writes are counted per process (a directory
// store's writes; an object store has no such points). A held write
// prints "faults: checkpoint write N held at POINT: FILE" to the worker's
// log, the signal a test waits for before its SIGKILL; it goes on after
// HoldLimit, so that a kill that never comes does not hang the worker, and
// fails as a cancelled write would if the write's context ends first.
//
// text gives an injected error any bytes, as an error that quotes a file
// may hold: a NUL, invalid UTF-8, a megabyte ("text=00", "text=fffe",
// "text=41*1048576"). They travel hex-encoded and repeated because an
// environment variable can hold neither a NUL nor a megabyte; the
// expansion is limited to MaxText bytes.
package faults

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/trainer"
)

// EnvPlan names the environment variable that holds a worker's plan.
const EnvPlan = "DQNFLOW_FAULTS"

// Plan says which faults to inject. The zero Plan injects none.
type Plan struct {
	Delay              map[string]time.Duration
	NaNOnTrain         int64
	DeviceErrorOnTrain int64
	// DeviceErrorDevice restricts DeviceErrorOnTrain to the device of
	// that name; "" means every device.
	DeviceErrorDevice string
	// Text is quoted by the injected errors, after their message.
	Text string
	// Hold is, for each point of a checkpoint write, the number of the
	// write (1 for the process's first) that stops there.
	Hold map[checkpoint.WritePoint]int64
}

// MaxText is the most bytes a plan's text may expand to.
const MaxText = 16 << 20

var stages = map[string]bool{"collect": true, "train": true, "sync": true, "snapshot": true, "backtest": true}

var writePoints = map[checkpoint.WritePoint]bool{checkpoint.TempSynced: true, checkpoint.Renamed: true}

// HoldLimit is how long a held checkpoint write waits for the kill.
const HoldLimit = 2 * time.Minute

// Parse reads a plan (see the package comment); errors name the item.
func Parse(s string) (Plan, error) {
	p := Plan{Delay: map[string]time.Duration{}, Hold: map[checkpoint.WritePoint]int64{}}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		key, val, ok := strings.Cut(item, "=")
		if !ok {
			return Plan{}, fmt.Errorf("%s: item %q: want KEY=VALUE", EnvPlan, item)
		}
		switch {
		case strings.HasPrefix(key, "delay:"):
			stage := strings.TrimPrefix(key, "delay:")
			d, err := time.ParseDuration(val)
			if !stages[stage] || err != nil || d < 0 {
				return Plan{}, fmt.Errorf("%s: item %q: want delay:STAGE=DURATION, STAGE one of collect, train, sync, snapshot, backtest", EnvPlan, item)
			}
			p.Delay[stage] = d
		case strings.HasPrefix(key, "hold:"):
			at := checkpoint.WritePoint(strings.TrimPrefix(key, "hold:"))
			n, err := strconv.ParseInt(val, 10, 64)
			if !writePoints[at] || err != nil || n < 1 {
				return Plan{}, fmt.Errorf("%s: item %q: want hold:POINT=N, POINT one of %s, %s and N a write number ≥ 1", EnvPlan, item, checkpoint.TempSynced, checkpoint.Renamed)
			}
			p.Hold[at] = n
		case key == "nan-on-train" || key == "device-error-on-train":
			num, device, on := strings.Cut(val, "@")
			n, err := strconv.ParseInt(num, 10, 64)
			if err != nil || n < 1 {
				return Plan{}, fmt.Errorf("%s: item %q: want a call number ≥ 1", EnvPlan, item)
			}
			if on && (key != "device-error-on-train" || device == "") {
				return Plan{}, fmt.Errorf("%s: item %q: only device-error-on-train takes @DEVICE, a device name such as cpu:1", EnvPlan, item)
			}
			if key == "nan-on-train" {
				p.NaNOnTrain = n
			} else {
				p.DeviceErrorOnTrain, p.DeviceErrorDevice = n, device
			}
		case key == "text":
			text, err := parseText(val)
			if err != nil {
				return Plan{}, fmt.Errorf("%s: item %.80q: %v", EnvPlan, item, err)
			}
			p.Text = text
		default:
			return Plan{}, fmt.Errorf("%s: item %q: unknown fault %q", EnvPlan, item, key)
		}
	}
	return p, nil
}

// parseText reads HEX[*N]: the bytes HEX encodes, N times (once without *N).
func parseText(val string) (string, error) {
	h, reps, repeated := strings.Cut(val, "*")
	raw, err := hex.DecodeString(h)
	if err != nil || len(raw) == 0 {
		return "", fmt.Errorf("want text=HEX[*N], HEX an even number of hex digits")
	}
	n := 1
	if repeated {
		if n, err = strconv.Atoi(reps); err != nil || n < 1 {
			return "", fmt.Errorf("want text=HEX[*N], N a count ≥ 1")
		}
	}
	if n > MaxText/len(raw) {
		return "", fmt.Errorf("text of %d × %d bytes is over the %d-byte limit", n, len(raw), MaxText)
	}
	return strings.Repeat(string(raw), n), nil
}

// Backend wraps a backend so that its trainers fail as Plan says. Calls
// are counted over every trainer of the backend (its device).
type Backend struct {
	trainer.Backend
	Plan Plan
	// Device is the name of the backend's device, which
	// Plan.DeviceErrorDevice selects.
	Device string
	trains atomic.Int64
}

// New implements trainer.Backend.
func (b *Backend) New(ctx context.Context, cfg config.RunConfig, ds *market.Dataset, warm *checkpoint.Checkpoint) (trainer.Trainer, error) {
	t, err := b.Backend.New(ctx, cfg, ds, warm)
	if err != nil {
		return nil, err
	}
	return &faulty{Trainer: t, b: b}, nil
}

// Restore implements trainer.Backend.
func (b *Backend) Restore(ctx context.Context, ck *checkpoint.Checkpoint, ds *market.Dataset) (trainer.Trainer, error) {
	t, err := b.Backend.Restore(ctx, ck, ds)
	if err != nil {
		return nil, err
	}
	return &faulty{Trainer: t, b: b}, nil
}

// quote is the plan's text as the injected errors quote it: ", text: …"
// when there is one.
func (b *Backend) quote() string {
	if b.Plan.Text == "" {
		return ""
	}
	return ", text: " + b.Plan.Text
}

type faulty struct {
	trainer.Trainer
	b *Backend
}

func (f *faulty) delay(ctx context.Context, stage string) error {
	d := f.b.Plan.Delay[stage]
	if d <= 0 {
		return nil
	}
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *faulty) Collect(ctx context.Context, steps int) (trainer.CollectStats, error) {
	if err := f.delay(ctx, "collect"); err != nil {
		return trainer.CollectStats{}, err
	}
	return f.Trainer.Collect(ctx, steps)
}

func (f *faulty) Train(ctx context.Context, steps int, progress func(trainer.Progress)) (trainer.TrainStats, error) {
	if err := f.delay(ctx, "train"); err != nil {
		return trainer.TrainStats{}, err
	}
	n := f.b.trains.Add(1)
	switch n {
	case f.b.Plan.NaNOnTrain:
		return trainer.TrainStats{}, fmt.Errorf("injected fault (train call %d%s): loss is NaN: %w", n, f.b.quote(), trainer.ErrNonFinite)
	case f.b.Plan.DeviceErrorOnTrain:
		if d := f.b.Plan.DeviceErrorDevice; d != "" && d != f.b.Device {
			break
		}
		return trainer.TrainStats{}, fmt.Errorf("injected fault (train call %d%s): %w", n, f.b.quote(), trainer.ErrDevice)
	}
	return f.Trainer.Train(ctx, steps, progress)
}

func (f *faulty) SyncTarget() error {
	if err := f.delay(context.Background(), "sync"); err != nil {
		return err
	}
	return f.Trainer.SyncTarget()
}

func (f *faulty) Snapshot() (*checkpoint.Checkpoint, error) {
	if err := f.delay(context.Background(), "snapshot"); err != nil {
		return nil, err
	}
	return f.Trainer.Snapshot()
}

func (f *faulty) Backtest(ctx context.Context, ds *market.Dataset, r market.Range) (sim.Report, error) {
	if err := f.delay(ctx, "backtest"); err != nil {
		return sim.Report{}, err
	}
	return f.Trainer.Backtest(ctx, ds, r)
}

// WriteHook returns the checkpoint store hook (checkpoint.Store.Hook) that
// holds the writes p.Hold names, announcing each on log; nil when p holds
// none.
func (p Plan) WriteHook(log io.Writer) checkpoint.WriteHook {
	if len(p.Hold) == 0 {
		return nil
	}
	var mu sync.Mutex
	calls := map[checkpoint.WritePoint]int64{}
	return func(ctx context.Context, at checkpoint.WritePoint, file string) error {
		mu.Lock()
		calls[at]++
		n := calls[at]
		mu.Unlock()
		if n != p.Hold[at] {
			return nil
		}
		fmt.Fprintf(log, "faults: checkpoint write %d held at %s: %s (kill the process now; the write goes on in %s)\n", n, at, file, HoldLimit)
		select {
		case <-time.After(HoldLimit):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
