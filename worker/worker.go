// Package worker wires dqnflow's Temporal workers: which task queues a
// process serves, worker affinity through sessions, the registry of live
// trainers, and the custom search attributes the workflows need.
//
// A process has a role: "control" serves workflows.ControlTaskQueue (the
// workflows and the control activities), "gpu" serves
// workflows.GPUTaskQueue (the trainer's session activities, at most Slots
// runs at a time), "all" both (`dqnflow dev`). See
// docs/adr/0001-worker-affinity-with-sessions.md.
package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/workflows"
)

// Role says which task queues a worker process serves.
type Role string

// The roles of a worker process.
const (
	RoleAll     Role = "all"
	RoleControl Role = "control"
	RoleGPU     Role = "gpu"
)

// ParseRole checks a --role value.
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case RoleAll, RoleControl, RoleGPU:
		return r, nil
	}
	return "", fmt.Errorf("worker role %q: want all, control or gpu", s)
}

func (r Role) control() bool { return r == RoleAll || r == RoleControl }
func (r Role) gpu() bool     { return r == RoleAll || r == RoleGPU }

// DefaultIdleTimeout is how long a trainer nobody uses stays in memory.
const DefaultIdleTimeout = 15 * time.Minute

// DefaultStopTimeout is how long a stopping GPU worker waits for running
// activities (an epoch can take minutes; its sessions move elsewhere after).
const DefaultStopTimeout = 30 * time.Second

// Config is what a worker process needs.
type Config struct {
	Role Role
	// Devices are the devices a GPU worker trains on (backend.Discover
	// finds them), each serving RunsPerDevice runs at once (default 1): the
	// worker accepts len(Devices)·RunsPerDevice sessions
	// (MaxConcurrentSessionExecutionSize), and a run's trainer lives on the
	// device of its session's slot (Slots).
	Devices       []trainer.Device
	RunsPerDevice int
	// Backend and Slots are the short form of a worker with one device,
	// used when Devices is empty: Backend builds the trainers, Slots runs at
	// once (default 1).
	Backend trainer.Backend
	Slots   int
	// Store is the metadata store; required.
	Store activities.Store
	// Data is where the worker reads price files from: its data roots and
	// read limits (activities.Trainer.Data; the zero value reads from the
	// working directory).
	Data prices.Source
	// Prepare loads a run's dataset; nil means market.Prepare from Data.
	Prepare func(config.RunConfig) (*market.Dataset, error)
	// Evaluate backtests a checkpoint for EvaluateCheckpoints; nil means
	// its greedy policy through trainer/policy (activities.Trainer.Evaluate).
	Evaluate func(*checkpoint.Checkpoint, *market.Dataset, market.Range) (sim.Report, error)
	// Checkpoints is the store of every checkpoint (a directory or an
	// s3:// bucket prefix): checkpoint.dir is relative to it and nothing
	// outside it is written, read or deleted (activities.Trainer.Checkpoints);
	// nil means the working directory.
	Checkpoints *checkpoint.Store
	// IdleTimeout evicts trainers unused for this long, and ends sessions
	// in which no activity ran for this long (Slots); default
	// DefaultIdleTimeout, negative disables both.
	IdleTimeout time.Duration
	// HeartbeatInterval of the session activities; zero means one second.
	HeartbeatInterval time.Duration
	// StopTimeout is how long a stopping GPU worker lets running activities
	// finish before it cancels them and gives up its sessions; zero means
	// DefaultStopTimeout.
	StopTimeout time.Duration
	// Workflows are the workflow options; every control worker must use the
	// same ones.
	Workflows workflows.Options
	// Logger for the registry; nil means none.
	Logger log.Logger
	// TrainerMetrics, if set, receives the session activities'
	// measurements (*Metrics; the SDK's own metrics go through the client).
	TrainerMetrics activities.TrainerMetrics
}

// Worker is the Temporal workers of one process.
type Worker struct {
	workers []sdkworker.Worker
	// Registry holds the live trainers; nil without the gpu role.
	Registry *Registry
	// Slots accounts for the sessions; nil without the gpu role.
	Slots *Slots

	control     sdkworker.Worker    // the control worker; nil without the control role
	trainer     *activities.Trainer // the session activities; nil without the gpu role
	stopTimeout time.Duration
	logger      log.Logger
}

// New builds the workers of cfg.Role on client c; Start or Run starts them.
func New(c client.Client, cfg Config) (*Worker, error) {
	if !cfg.Role.control() && !cfg.Role.gpu() {
		return nil, fmt.Errorf("worker role %q: want all, control or gpu", cfg.Role)
	}
	if cfg.Store == nil {
		return nil, errors.New("worker: no metadata store")
	}
	opts := cfg.Workflows.WithDefaults()
	logger := CleanLogger(cfg.Logger)
	w := &Worker{}
	if cfg.Role.control() {
		cw := sdkworker.New(c, opts.ControlTaskQueue, ControlOptions())
		RegisterControl(cw, &workflows.Workflows{Options: opts}, &activities.Control{Store: cfg.Store, Checkpoints: cfg.Checkpoints})
		w.workers, w.control = append(w.workers, cw), cw
	}
	if cfg.Role.gpu() {
		devices, perDevice := cfg.Devices, cfg.RunsPerDevice
		if len(devices) == 0 {
			devices, perDevice = []trainer.Device{{Backend: cfg.Backend}}, cfg.Slots
		}
		names := make([]string, len(devices))
		for i, d := range devices {
			if d.Backend == nil {
				return nil, fmt.Errorf("worker: device %d %q: the gpu role needs a trainer backend", i, d.Name)
			}
			names[i] = d.Name
		}
		perDevice = max(perDevice, 1)
		idle := cfg.IdleTimeout
		if idle == 0 {
			idle = DefaultIdleTimeout
		}
		w.Registry = NewRegistry(idle, logger)
		w.Slots = NewSlots(names, perDevice, idle, w.Registry, logger)
		gopts := GPUOptions(len(devices) * perDevice)
		gopts.Interceptors = append(gopts.Interceptors, w.Slots)
		if cfg.StopTimeout > 0 {
			gopts.WorkerStopTimeout = cfg.StopTimeout
		}
		gw := sdkworker.New(c, opts.GPUTaskQueue, gopts)
		w.trainer = &activities.Trainer{
			Devices: devices, Registry: w.Registry, Slots: w.Slots, Store: cfg.Store, Data: cfg.Data, Prepare: cfg.Prepare, Evaluate: cfg.Evaluate,
			Checkpoints: cfg.Checkpoints, HeartbeatInterval: cfg.HeartbeatInterval, Metrics: cfg.TrainerMetrics,
		}
		w.stopTimeout, w.logger = gopts.WorkerStopTimeout, logger
		RegisterGPU(gw, w.trainer)
		w.workers = append(w.workers, gw)
	}
	return w, nil
}

// ControlOptions are the SDK worker options of a control worker, the one
// place they are derived (with workflows.Options.WithDefaults for the
// workflows' own options): every control worker must run the workflows
// alike. A workflow task waits at most 1 s (the SDK's default is 5 s) for
// the worker that has the workflow cached before going to any worker: when
// that worker died with a run, this is part of the time until the run
// recovers (docs/reliability.md). A busier worker only loses a cache hit
// and replays the history (at most HistoryLimit events). A workflow task that panics, as a
// non-determinism error does, blocks its workflow until a fixed worker
// replays it (the SDK's default, stated here); GPU workers end the
// sessions such a workflow holds (Slots). Control workers run no sessions,
// so Worker Versioning may be enabled here (ADR 0001, ADR 0004). Every
// error and log line of its workflows and activities is clean text
// (CleanText, ADR 0030).
func ControlOptions() sdkworker.Options {
	return sdkworker.Options{
		StickyScheduleToStartTimeout: time.Second,
		WorkflowPanicPolicy:          sdkworker.BlockWorkflow,
		Interceptors:                 []interceptor.WorkerInterceptor{CleanText},
	}
}

// GPUOptions are the SDK worker options of a GPU worker with slots slots
// (at least 1): sessions enabled, at most slots sessions at once, time for
// a running activity to notice the shutdown, and heartbeats sent to the
// server at least every second. The SDK otherwise sends an activity's
// heartbeat details at most every 0.8 × its heartbeat timeout (16 s for
// the session activities): a RunEpochs chunk reports each epoch in them
// (ADR 0010), which `run watch` shows and which carry a cancellation back
// to the activity. Heartbeats are not history events. Every error and log
// line of its activities is clean text (CleanText, ADR 0030); CleanText
// comes first, so that it sees the errors of the interceptors after it.
func GPUOptions(slots int) sdkworker.Options {
	return sdkworker.Options{
		EnableSessionWorker:               true,
		MaxConcurrentSessionExecutionSize: max(slots, 1),
		WorkerStopTimeout:                 DefaultStopTimeout,
		MaxHeartbeatThrottleInterval:      time.Second,
		Interceptors:                      []interceptor.WorkerInterceptor{CleanText},
	}
}

// RegisterControl registers the workflows and the control activities, under
// the names the workflows use.
func RegisterControl(r sdkworker.Registry, wf *workflows.Workflows, ctl *activities.Control) {
	r.RegisterWorkflowWithOptions(wf.TrainingRun, workflow.RegisterOptions{Name: workflows.TrainingRunName})
	r.RegisterWorkflowWithOptions(wf.Retrain, workflow.RegisterOptions{Name: workflows.RetrainName})
	r.RegisterWorkflowWithOptions(wf.Sweep, workflow.RegisterOptions{Name: workflows.SweepName})
	r.RegisterWorkflowWithOptions(wf.WalkForward, workflow.RegisterOptions{Name: workflows.WalkForwardName})
	r.RegisterWorkflowWithOptions(wf.WalkForwardWindow, workflow.RegisterOptions{Name: workflows.WalkForwardWindowName})
	r.RegisterActivity(ctl)
}

// RegisterGPU registers the trainer's session activities (and the
// walk-forward's: WalkForwardPlan outside a session, WalkForwardWindow
// in one).
func RegisterGPU(r sdkworker.Registry, tr *activities.Trainer) {
	r.RegisterActivity(tr)
}

// Start starts every worker; on an error the ones started are stopped.
func (w *Worker) Start() error {
	for i, sw := range w.workers {
		if err := sw.Start(); err != nil {
			for _, s := range w.workers[:i] {
				s.Stop()
			}
			return fmt.Errorf("start worker: %w", err)
		}
	}
	return nil
}

// Stop stops the workers, then closes every trainer held, waiting for runs
// in use until ctx ends. The control worker stops first: the SDK tells the
// server that its cached workflows are gone, so the workflow tasks that
// follow go to another control worker at once, instead of to this process
// while it exits (a task it took and dropped would wait for its 10 s
// timeout). Then the GPU worker ends the chunks it runs and waits, for
// its stop timeout at most, until they have recorded the checkpoints they
// were writing (activities.Trainer.Drain): its sessions end only then, so
// the runs move on from those checkpoints.
func (w *Worker) Stop(ctx context.Context) error {
	if w.control != nil {
		w.control.Stop()
	}
	if w.trainer != nil {
		dctx, cancel := context.WithTimeout(ctx, w.stopTimeout)
		n, err := w.trainer.Drain(dctx)
		cancel()
		if w.logger != nil && n > 0 {
			if err != nil {
				w.logger.Warn("Stopping: chunks still running after the stop timeout; their runs recover from their last recorded checkpoint",
					"chunks", n, "stop_timeout", w.stopTimeout, "error", err)
			} else {
				w.logger.Info("Stopping: ended the running chunks after their checkpoints were recorded", "chunks", n)
			}
		}
	}
	for _, sw := range w.workers {
		if sw != w.control {
			sw.Stop()
		}
	}
	if w.Slots != nil {
		w.Slots.Close()
	}
	if w.Registry != nil {
		return w.Registry.Close(ctx)
	}
	return nil
}

// Run starts the workers and stops them when ctx ends.
func (w *Worker) Run(ctx context.Context) error {
	if err := w.Start(); err != nil {
		return err
	}
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return w.Stop(stopCtx)
}
