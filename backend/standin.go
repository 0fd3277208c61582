package backend

import (
	"context"
	"fmt"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/trainer"
)

// StandIn returns backend b standing in for device name, number i of n
// (from 0): its trainers compute exactly what b's do, and report the
// stand-in in Info.Device and in their checkpoints' device metadata, so
// that the run's row, its checkpoints and its progress name the device the
// worker's slot gave it, as they do for a GPU.
func StandIn(b trainer.Backend, name string, i, n int) trainer.Backend {
	return standIn{b: b, label: fmt.Sprintf("%s (stand-in device %d of %d)", name, i+1, n)}
}

type standIn struct {
	b     trainer.Backend
	label string
}

func (s standIn) New(ctx context.Context, cfg config.RunConfig, ds *market.Dataset, warm *checkpoint.Checkpoint) (trainer.Trainer, error) {
	t, err := s.b.New(ctx, cfg, ds, warm)
	if err != nil {
		return nil, err
	}
	return s.wrap(t), nil
}

func (s standIn) Restore(ctx context.Context, ck *checkpoint.Checkpoint, ds *market.Dataset) (trainer.Trainer, error) {
	t, err := s.b.Restore(ctx, ck, ds)
	if err != nil {
		return nil, err
	}
	return s.wrap(t), nil
}

func (s standIn) wrap(t trainer.Trainer) trainer.Trainer {
	info := t.Info()
	info.Device = s.label + ": " + info.Device
	return standInTrainer{Trainer: t, info: info}
}

// standInTrainer is a trainer of a stand-in device.
type standInTrainer struct {
	trainer.Trainer
	info trainer.Info
}

func (t standInTrainer) Info() trainer.Info { return t.info }

func (t standInTrainer) Snapshot() (*checkpoint.Checkpoint, error) {
	ck, err := t.Trainer.Snapshot()
	if err != nil {
		return nil, err
	}
	if ck.Meta == nil {
		ck.Meta = map[string]string{}
	}
	ck.Meta[checkpoint.MetaDevice] = t.info.Device
	return ck, nil
}
