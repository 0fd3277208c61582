package activities

import (
	"context"
	"fmt"
	"os"
)

// need is what an activity asks of its run's trainer (Trainer.hold).
type need struct {
	// epoch is the epoch whose end, its last stage complete, the activity
	// starts from: Checkpoint and Backtest that epoch's, RunEpochs the
	// one before its chunk.
	epoch int
	// answered, when set, reports a request the run already answered,
	// checked before the trainer's position (RunEpochs: the chunk it
	// completed last, after which the trainer is past epoch).
	answered func(*Run) bool
	// asked is the request as TrainerLost names it: "asked to collect
	// epoch 3".
	asked string
}

// hold is the opening every activity on a worker's trainer shares: it
// heartbeats hb while the activity works, takes run id's Run locked
// (TrainerLost when this worker holds none or closed it) and checks the
// trainer's position against n; a request the trainer cannot take is
// refused with TrainerLost, naming what was asked and where the trainer
// is. replay reports a request that already completed (n.answered): the activity returns its recorded result
// without running. On success the caller defers release, which unlocks
// the run and then stops the heartbeat.
func (a *Trainer) hold(ctx context.Context, id string, hb Heartbeat, n need) (run *Run, p *progress, replay bool, release func(), err error) {
	p, stop := a.beat(ctx, hb)
	run, err = a.acquire(ctx, id)
	if err != nil {
		stop()
		return nil, nil, false, nil, err
	}
	release = func() {
		run.Unlock()
		stop()
	}
	if n.answered != nil && n.answered(run) {
		return run, p, true, release, nil
	}
	if run.Epoch != n.epoch || run.Stage != StageSynced {
		err := trainerLost(id, fmt.Sprintf("%s, the trainer here is at %s", n.asked, run.where()))
		release()
		return nil, nil, false, nil, err
	}
	return run, p, replay, release, nil
}

// acquire returns run id's Run, locked, or a TrainerLost error when this
// worker holds none.
func (a *Trainer) acquire(ctx context.Context, id string) (*Run, error) {
	run := a.Registry.Get(id)
	if run == nil {
		host, _ := os.Hostname()
		return nil, trainerLost(id, "worker "+host+" holds no trainer for it")
	}
	if err := run.Lock(ctx); err != nil {
		return nil, err
	}
	if run.Closed() {
		run.Unlock()
		return nil, trainerLost(id, "its trainer on this worker was closed")
	}
	return run, nil
}
