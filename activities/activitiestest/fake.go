// Package activitiestest provides stand-ins for the activities'
// dependencies: a deterministic fake trainer backend and an in-memory
// metadata store. They let the activities, and workflows running the real
// activities, be tested without a GPU, market data or PostgreSQL.
package activitiestest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/trainer"
)

// Dataset returns a tiny dataset for the fake backend: it has a validation
// range, which is all the fake trainer reads. Use it as
// activities.Trainer.Prepare.
func Dataset(cfg config.RunConfig) (*market.Dataset, error) {
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	return &market.Dataset{
		Train: market.Range{From: 0, To: 80}, Valid: market.Range{From: 80, To: 100},
		Bars:        &prices.Bars{Name: "fake", Time: []time.Time{t0, t0.Add(time.Hour)}},
		BarsPerYear: 6048,
	}, nil
}

// Backend is a deterministic fake trainer.Backend. Its trainers hold one
// weight w and count steps: every gradient step sets w ← w·0.5 + step, so
// that any divergence between two histories shows in w, bit for bit. A
// checkpoint holds w, the global step and the environment steps.
type Backend struct {
	// Sharpe gives the validation Sharpe of a trainer at a global step;
	// nil means 1 − 1/(1+step).
	Sharpe func(globalStep int64) float64
	// TrainErr, if set, is called before each Train; a non-nil result
	// fails the call after half the steps (a part-way failure).
	TrainErr func(globalStep int64) error
	// BeforeStep, if set, is called before each gradient step with the
	// global step reached so far; an error fails Train. A test blocks in it
	// to keep an epoch running.
	BeforeStep func(ctx context.Context, globalStep int64) error

	mu       sync.Mutex
	news     int
	restores int
	trainers []*Trainer
}

// Counts returns how many trainers New and Restore built.
func (b *Backend) Counts() (news, restores int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.news, b.restores
}

// Trainers returns every trainer built, in order.
func (b *Backend) Trainers() []*Trainer {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*Trainer(nil), b.trainers...)
}

// New builds a fresh trainer, or one with warm's weight.
func (b *Backend) New(ctx context.Context, cfg config.RunConfig, ds *market.Dataset, warm *checkpoint.Checkpoint) (trainer.Trainer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	t := &Trainer{b: b, cfg: cfg, W: 1}
	if warm != nil {
		w, err := warm.F32("w", 1)
		if err != nil {
			return nil, fmt.Errorf("warm start: %w", err)
		}
		t.W = w[0]
	}
	b.mu.Lock()
	b.news++
	b.trainers = append(b.trainers, t)
	b.mu.Unlock()
	return t, nil
}

// Restore rebuilds the trainer saved in ck.
func (b *Backend) Restore(ctx context.Context, ck *checkpoint.Checkpoint, ds *market.Dataset) (trainer.Trainer, error) {
	var cfg config.RunConfig
	if err := cfg.UnmarshalJSON([]byte(ck.Meta[checkpoint.MetaConfig])); err != nil {
		return nil, err
	}
	w, err := ck.F32("w", 1)
	if err != nil {
		return nil, err
	}
	st, err := ck.I64("steps", 2)
	if err != nil {
		return nil, err
	}
	t := &Trainer{b: b, cfg: cfg, W: w[0], Step: st[0], EnvSteps: st[1]}
	b.mu.Lock()
	b.restores++
	b.trainers = append(b.trainers, t)
	b.mu.Unlock()
	return t, nil
}

// Trainer is the fake backend's trainer.
type Trainer struct {
	b        *Backend
	cfg      config.RunConfig
	W        float32 // the one weight
	Step     int64   // gradient steps
	EnvSteps int64
	Trains   int // Train calls
	Closed   bool
}

// Config is the config the trainer was built with.
func (t *Trainer) Config() config.RunConfig { return t.cfg }

// Info reports the fake device.
func (t *Trainer) Info() trainer.Info {
	return trainer.Info{Backend: "fake", Device: "fake device", Precision: t.cfg.Precision, StorageDType: "f32", ComputeDType: "f32", Parameters: 1}
}

// Collect counts environment steps.
func (t *Trainer) Collect(ctx context.Context, steps int) (trainer.CollectStats, error) {
	t.EnvSteps += int64(steps * t.cfg.Env.NumEnvs)
	return trainer.CollectStats{EnvSteps: t.EnvSteps, Transitions: steps * t.cfg.Env.NumEnvs, BufferSize: int(t.EnvSteps), Epsilon: 0.5}, nil
}

// Train runs steps fake gradient steps, reporting progress after each.
func (t *Trainer) Train(ctx context.Context, steps int, progress func(trainer.Progress)) (trainer.TrainStats, error) {
	t.Trains++
	var fail error
	if t.b.TrainErr != nil {
		fail = t.b.TrainErr(t.Step)
	}
	for i := 1; i <= steps; i++ {
		if fail != nil && i > steps/2 {
			return trainer.TrainStats{}, fmt.Errorf("fake train at global step %d: %w", t.Step, fail)
		}
		if t.b.BeforeStep != nil {
			if err := t.b.BeforeStep(ctx, t.Step); err != nil {
				return trainer.TrainStats{}, err
			}
		}
		t.Step++
		t.W = t.W*0.5 + float32(t.Step)
		if progress != nil {
			progress(trainer.Progress{Step: i, Steps: steps, GlobalStep: t.Step, Loss: t.loss()})
		}
	}
	return trainer.TrainStats{Steps: steps, GlobalStep: t.Step, Loss: t.loss(), GradNorm: 1}, nil
}

func (t *Trainer) loss() float64 { return 1 / float64(1+t.Step) }

// SyncTarget does nothing.
func (t *Trainer) SyncTarget() error { return nil }

// Snapshot saves w and the step counters.
func (t *Trainer) Snapshot() (*checkpoint.Checkpoint, error) {
	return &checkpoint.Checkpoint{
		Meta: map[string]string{
			checkpoint.MetaFormat:     checkpoint.FormatVersion,
			checkpoint.MetaGlobalStep: strconv.FormatInt(t.Step, 10),
			checkpoint.MetaConfig:     string(t.cfg.JSON()),
			checkpoint.MetaBackend:    "fake",
		},
		Tensors: []checkpoint.Tensor{
			checkpoint.F32Tensor("w", []int{1}, []float32{t.W}),
			checkpoint.I64Tensor("steps", []int{2}, []int64{t.Step, t.EnvSteps}),
		},
	}, nil
}

// Backtest reports the Backend's Sharpe at the trainer's step.
func (t *Trainer) Backtest(ctx context.Context, ds *market.Dataset, r market.Range) (sim.Report, error) {
	return t.b.report(t.Step, ds, r), nil
}

// Evaluate is activities.Trainer.Evaluate for the fake backend's
// checkpoints, which hold no network: the report Backtest gives at the
// checkpoint's global step.
func (b *Backend) Evaluate(ck *checkpoint.Checkpoint, ds *market.Dataset, r market.Range) (sim.Report, error) {
	st, err := ck.I64("steps", 2)
	if err != nil {
		return sim.Report{}, err
	}
	return b.report(st[0], ds, r), nil
}

// report is the fake backtest of a trainer at a global step over range r:
// its Sharpe, a tenth of it as the return, a 5 % drawdown.
func (b *Backend) report(step int64, ds *market.Dataset, r market.Range) sim.Report {
	s := 1 - 1/float64(1+step)
	if b.Sharpe != nil {
		s = b.Sharpe(step)
	}
	rep := sim.Report{From: ds.Bars.Time[0], To: ds.Bars.Time[len(ds.Bars.Time)-1], BarsPerYear: ds.BarsPerYear}
	rep.Sharpe, rep.TotalReturn, rep.MaxDrawdown, rep.Bars = s, s/10, 0.05, r.To-r.From+1
	return rep
}

// Close marks the trainer closed; a second Close is an error, so tests
// catch a double free.
func (t *Trainer) Close() error {
	if t.Closed {
		return errors.New("fake trainer closed twice")
	}
	t.Closed = true
	return nil
}
