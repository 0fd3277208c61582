package activities

import (
	"time"

	"github.com/dqnflow/dqnflow/trainer"
)

// TrainerMetrics receives what the session activities measure, for the
// worker's metrics endpoint. *worker.Metrics implements it; methods must be
// safe for concurrent use and must not block.
//
// device is the worker's name for the run's device ("cpu", "cpu:1",
// "cuda:0"; trainer.Device.Name), empty on a worker's only unnamed
// device; info is what the trainer reports, its long device description
// included.
type TrainerMetrics interface {
	// Collected reports a collection of envSteps environment steps (all
	// environments) that took d.
	Collected(runID, device string, info trainer.Info, st trainer.CollectStats, envSteps int64, d time.Duration)
	// Trained reports an epoch's training that took d.
	Trained(runID, device string, info trainer.Info, st trainer.TrainStats, d time.Duration)
	// DeviceMemory reports the device memory in use and in all.
	DeviceMemory(device string, info trainer.Info, used, total uint64)
}

// observeCollect passes a collection to a.Metrics, if set.
func (a *Trainer) observeCollect(run *Run, st trainer.CollectStats, d time.Duration) {
	if a.Metrics == nil {
		return
	}
	env := run.Config.Env
	a.Metrics.Collected(run.ID, run.Device, run.Info, st, int64(env.CollectSteps)*int64(env.NumEnvs), d)
}

// observeTrain passes an epoch's training, and the device memory where the
// trainer reports it, to a.Metrics, if set.
func (a *Trainer) observeTrain(run *Run, st trainer.TrainStats, d time.Duration) {
	if a.Metrics == nil {
		return
	}
	info := run.Info
	a.Metrics.Trained(run.ID, run.Device, info, st, d)
	if m, ok := run.Trainer.(trainer.MemoryReporter); ok {
		if used, total, err := m.DeviceMemory(); err == nil {
			a.Metrics.DeviceMemory(run.Device, info, used, total)
		}
	}
}
