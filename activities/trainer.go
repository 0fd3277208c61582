package activities

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/files"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/trainer"
)

// Trainer holds the session activities of training runs: they run on a GPU
// worker, inside the run's Temporal session, against the trainer that
// Registry holds for the run.
type Trainer struct {
	// Backend builds and restores trainers on this worker's device, when
	// the worker has one and Devices is empty.
	Backend trainer.Backend
	// Devices are the worker's devices when it has several (or names its
	// one). A run's trainer is built on the device of its session's slot,
	// as Slots.Device says.
	Devices []trainer.Device
	// Registry holds this worker's live runs between activities.
	Registry Registry
	// Slots keeps a slot for a run across its Continue-As-New; nil keeps
	// none (HoldSlot reports that).
	Slots SlotKeeper
	// Store records checkpoints and backtests.
	Store CheckpointStore
	// Data is where this worker reads price files from: its data roots
	// and read limits (prices.Source; the zero value reads from the working
	// directory). OpenTrainer checks every data path of a run against it
	// before any work.
	Data prices.Source
	// Prepare loads a run's dataset; nil means market.Prepare from Data. A test whose
	// backend needs no market data sets it (activitiestest.Dataset).
	Prepare func(config.RunConfig) (*market.Dataset, error)
	// Evaluate backtests a checkpoint on range r of ds for
	// EvaluateCheckpoints; nil means the checkpoint's greedy policy
	// through trainer/policy, the one path for checkpoints of every real
	// backend. A test whose backend writes no network sets it
	// (activitiestest.Backend.Evaluate).
	Evaluate func(ck *checkpoint.Checkpoint, ds *market.Dataset, r market.Range) (sim.Report, error)
	// Checkpoints is the store every checkpoint lives in (a directory of
	// this host or an s3:// bucket prefix); nil means the working
	// directory. checkpoint.dir is taken relative to it, and no checkpoint
	// outside it is written or read. Blobs are written under
	// <store>/<checkpoint.dir>/<run id>/<execution id>/epoch-<NNNNNN>.safetensors
	// and referred to by URI (an absolute path in a directory store), so
	// every worker must open the same store: the same bucket, or the same
	// storage mounted at the same path.
	Checkpoints *checkpoint.Store
	// HeartbeatInterval is the period of liveness heartbeats while an
	// activity works; zero means one second.
	HeartbeatInterval time.Duration
	// Metrics, if set, receives each collection's and training's
	// measurements (the worker's Prometheus endpoint).
	Metrics TrainerMetrics

	chunks chunkSet // the RunEpochs chunks running here, for Drain
}

// OpenInput asks for run RunID's trainer at the end of epoch Epoch.
type OpenInput struct {
	RunID string `json:"run_id"`
	// ExecutionID is the Temporal run id of the run's first execution: its
	// checkpoints go to a directory of their own, so that a run under a
	// reused workflow id never writes over an earlier run's files. Empty
	// for runs started before execution ids were recorded.
	ExecutionID string           `json:"execution_id,omitempty"`
	Config      config.RunConfig `json:"config"`
	// Epoch and GlobalStep are where the workflow stands: a trainer held
	// here at exactly that point is used as it is.
	Epoch      int   `json:"epoch"`
	GlobalStep int64 `json:"global_step"`
	// Resume is the run's last checkpoint, restored when no trainer is held
	// at the expected point; nil before the first checkpoint.
	Resume *CheckpointRef `json:"resume,omitempty"`
	// Warm, used only when Resume is nil, warm-starts a fresh trainer from
	// another run's weights.
	Warm *CheckpointRef `json:"warm,omitempty"`
}

// OpenOutput says how the trainer was obtained and where it stands. The
// workflow continues from Epoch, which is the checkpoint's epoch after a
// restore (work after it is redone) and 0 for a new trainer.
type OpenOutput struct {
	Epoch      int          `json:"epoch"`
	GlobalStep int64        `json:"global_step"`
	Reused     bool         `json:"reused"`   // the trainer was already in memory
	Restored   bool         `json:"restored"` // rebuilt from Resume
	Info       trainer.Info `json:"info"`
	Host       string       `json:"host"`
	// NotBitExact says why the run is no longer bit-identical to an
	// uninterrupted run (a resume on another backend, device or
	// architecture); "" while it is.
	NotBitExact string `json:"not_bit_exact,omitempty"`
	// Fallback is the checkpoint restored instead of the damaged
	// OpenInput.Resume (Damaged says why that one was refused): the
	// previous good checkpoint of the run, from which the workflow goes on.
	Fallback *CheckpointRef `json:"fallback,omitempty"`
	Damaged  string         `json:"damaged,omitempty"`
}

// OpenTrainer makes this worker hold run in.RunID's trainer at the point the
// workflow expects: the trainer already in memory if it is exactly there
// (after a Continue-As-New on the same worker), else one restored from
// in.Resume (after losing a worker, a pause or a failed step), else a new
// one, warm-started from in.Warm when given.
func (a *Trainer) OpenTrainer(ctx context.Context, in OpenInput) (OpenOutput, error) {
	if in.RunID == "" {
		return OpenOutput{}, temporal.NewNonRetryableApplicationError("open trainer: empty run id", ErrTypeInvalidConfig, nil)
	}
	if err := in.Config.Validate(); err != nil {
		return OpenOutput{}, classify("run "+in.RunID+": open trainer", err)
	}
	_, stop := a.beat(ctx, Heartbeat{Epoch: in.Epoch, Stage: "open", GlobalStep: in.GlobalStep})
	defer stop()
	host, _ := os.Hostname()
	dev, err := a.device(ctx)
	if err != nil {
		return OpenOutput{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("run %s: open trainer: %v; the run opens its session again", in.RunID, err), ErrTypeTrainerLost, err)
	}

	if run := a.Registry.Get(in.RunID); run != nil {
		if err := run.Lock(ctx); err != nil {
			return OpenOutput{}, err
		}
		if !run.Closed() && run.ExecutionID == in.ExecutionID && run.Config == in.Config && run.Epoch == in.Epoch &&
			run.Stage == StageSynced && run.GlobalStep == in.GlobalStep && run.Device == dev.Name {
			out := OpenOutput{Epoch: run.Epoch, GlobalStep: run.GlobalStep, Reused: true, Info: run.Info, Host: host, NotBitExact: run.NotBitExact}
			run.Unlock()
			a.releaseSlot(ctx)
			return out, nil
		}
		activity.GetLogger(ctx).Info("Discarding a trainer that is not where the workflow stands",
			"run", in.RunID, "held", run.where(), "held_device", run.Device,
			"want_epoch", in.Epoch, "want_global_step", in.GlobalStep, "want_device", dev.Name)
		a.Registry.Remove(run)
		err := run.Close()
		run.Unlock()
		if err != nil {
			activity.GetLogger(ctx).Warn("Closing a discarded trainer failed", "run", in.RunID, "error", err)
		}
	}

	what := "run " + in.RunID + ": open trainer"
	if dev.Name != "" {
		what += " on " + dev.Name
	}
	cfg := dev.config(in.Config)
	if cfg.Device != in.Config.Device {
		activity.GetLogger(ctx).Info("The slot decides the device: the run asked for another CUDA device",
			"run", in.RunID, "asked", in.Config.Device, "runs_on", cfg.Device)
	}
	if err := a.checkPaths(what, in); err != nil {
		return OpenOutput{}, err
	}
	ds, pn, err := a.prepareRun(ctx, in.Config)
	if err != nil {
		return OpenOutput{}, dataError(what, in.Config, err)
	}
	var (
		tr          trainer.Trainer
		epoch       int
		globalStep  int64
		restored    bool
		notBitExact string
		fallback    *CheckpointRef // restored instead of a damaged in.Resume
		damaged     string         // why in.Resume was refused
	)
	switch {
	case in.Resume != nil:
		resume := *in.Resume
		ck, err := a.read(ctx, resume)
		if err == nil {
			if err = checkMeta(ck, in.RunID, resume); err != nil {
				err = fmt.Errorf("%s: %w: %v", resume.URI, checkpoint.ErrCorrupt, err)
			}
		}
		if errors.Is(err, checkpoint.ErrCorrupt) {
			var prev *CheckpointRef
			if ck, prev = a.previousGood(ctx, in.RunID, resume); prev != nil {
				activity.GetLogger(ctx).Warn("The run's last checkpoint is damaged; restoring the previous good one",
					"run", in.RunID, "damaged", resume.URI, "error", err, "restoring", prev.URI, "epoch", prev.Epoch)
				fallback, damaged, resume, err = prev, err.Error(), *prev, nil
			}
		}
		if err != nil {
			if errors.Is(err, checkpoint.ErrCorrupt) {
				return OpenOutput{}, nonRetryable(ErrTypeCorruptCheckpoint, what, err,
					"no earlier good checkpoint of the run is left; restore the file from a backup or start a new run")
			}
			return OpenOutput{}, readError(what, err)
		}
		if ds, pn, err = a.checkpointInputs(ctx, in, ck, ds, pn); err != nil {
			return OpenOutput{}, dataError(what, in.Config, err)
		}
		if err := checkPanel(ck, pn); err != nil {
			return OpenOutput{}, nonRetryable(ErrTypeBadData, what+": restore "+resume.URI, err,
				"put back the files the run trained on, or start a new run on the files as they are")
		}
		if tr, err = dev.Backend.Restore(ctx, trainer.ForRestore(ck), ds); err != nil {
			return OpenOutput{}, classify(what+": restore "+resume.URI, err)
		}
		epoch, globalStep, restored = resume.Epoch, resume.GlobalStep, true
		if notBitExact = trainer.ResumeExactness(ck.Meta, tr.Info()); notBitExact != "" {
			activity.GetLogger(ctx).Warn("The run is no longer bit-exact: it resumed from a checkpoint written on another backend, device or architecture",
				"run", in.RunID, "checkpoint", resume.URI, "why", notBitExact)
		}
	case in.Warm != nil:
		ck, err := a.read(ctx, *in.Warm)
		if err != nil {
			return OpenOutput{}, readError(what+": warm start", err)
		}
		if tr, err = dev.Backend.New(ctx, cfg, ds, ck); err != nil {
			return OpenOutput{}, classify(what+": warm start from "+in.Warm.URI, err)
		}
	default:
		if tr, err = dev.Backend.New(ctx, cfg, ds, nil); err != nil {
			return OpenOutput{}, classify(what, err)
		}
	}
	run := NewRun(in.RunID, in.Config, tr, ds, epoch, globalStep)
	run.ExecutionID, run.Device, run.Panel = in.ExecutionID, dev.Name, pn
	run.NotBitExact = notBitExact
	if err := a.Registry.Put(ctx, run); err != nil {
		tr.Close()
		return OpenOutput{}, fmt.Errorf("%s: %w", what, err)
	}
	a.releaseSlot(ctx)
	return OpenOutput{Epoch: epoch, GlobalStep: globalStep, Restored: restored, Info: run.Info, Host: host,
		NotBitExact: notBitExact, Fallback: fallback, Damaged: damaged}, nil
}

// checkPaths checks every path a run will use before any of its
// work: that the worker's data roots hold each price file of its config
// and that the file is one a read can take (prices.Source.Check), and that
// its checkpoint directory lies inside the checkpoint store (the blob of
// epoch 0 located as Checkpoint will locate every one). A path out of
// reach fails the run at once, non-retryably, naming its field, instead of
// after an epoch of training; a checkpoint to restore from is checked by
// the read that follows.
func (a *Trainer) checkPaths(what string, in OpenInput) error {
	what += ": check paths"
	if err := a.Data.Check(in.Config); err != nil {
		if errors.Is(err, files.ErrOutsideRoot) {
			return nonRetryable(ErrTypeInvalidConfig, what, err,
				"data.path (every file of data.series) must name a file inside the workers' data roots (dqnflow worker --data-root); start the run again with one")
		}
		return nonRetryable(ErrTypeBadData, what, err, "fix data.path (data.series) or the file, then start a new run")
	}
	run := &Run{ID: in.RunID, ExecutionID: in.ExecutionID, Config: in.Config}
	if _, err := a.blobURI(run, 0); err != nil {
		return classify(what+": checkpoint.dir "+in.Config.Checkpoint.Dir, err)
	}
	return nil
}

// dataError is the error of a run's data that cannot be prepared: a
// BadData failure, which ends the run, unless the file changed while it
// was read (files.ErrChanged: a file still being written), which a retry
// of the activity reads again.
func dataError(what string, cfg config.RunConfig, err error) error {
	field := "data.path"
	if cfg.Data.Series != "" {
		what += ": prepare the panel of data.series"
		field = "data.series"
	} else {
		what += ": prepare data " + cfg.Data.Path
	}
	if errors.Is(err, files.ErrChanged) {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nonRetryable(ErrTypeBadData, what, err, "fix "+field+" or the file, then start a new run")
}

// checkpointInputs returns the dataset a checkpoint restores into: ds,
// or, when the checkpoint's stored config (config.DecodeStored) has other
// data or env sections than in's, ds prepared again with the checkpoint's.
// A run's config never changes, so such a difference means the workflow
// input was written before a key existed and now decodes to a newer
// default (data.drop_features, say); the checkpoint says what the run was
// trained on, and the run goes on with that.
func (a *Trainer) checkpointInputs(ctx context.Context, in OpenInput, ck *checkpoint.Checkpoint, ds *market.Dataset, pn *market.Panel) (*market.Dataset, *market.Panel, error) {
	stored, err := trainer.CheckpointConfig(ck)
	if err != nil || stored.Data == in.Config.Data && stored.Env == in.Config.Env {
		return ds, pn, nil // a damaged config is Restore's to report
	}
	activity.GetLogger(ctx).Warn("The checkpoint's data or env settings differ from the run's config; the run keeps the checkpoint's",
		"run", in.RunID, "checkpoint_data", stored.Data, "config_data", in.Config.Data)
	c := in.Config
	c.Data, c.Env = stored.Data, stored.Env
	return a.prepareRun(ctx, c)
}

// checkPanel holds a panel run's data pn, prepared again to restore
// checkpoint ck, against the panel ck recorded (market.CheckPanel): a
// series' file with another SHA-256, or other ranges, would resume the
// run on data it did not train on (another normaliser, other windows).
// Nothing to check for a run on one series or a checkpoint that recorded
// no panel.
func checkPanel(ck *checkpoint.Checkpoint, pn *market.Panel) error {
	v, ok := ck.Meta[checkpoint.MetaPanel]
	if pn == nil || !ok {
		return nil
	}
	recs, err := market.ParsePanelMeta(v)
	if err != nil {
		return fmt.Errorf("%w: %v", checkpoint.ErrCorrupt, err)
	}
	return market.CheckPanel(recs, pn)
}

// device returns the device the calling run trains on: the worker's only
// one, or the one of its session's slot.
func (a *Trainer) device(ctx context.Context) (device, error) {
	switch {
	case len(a.Devices) == 0:
		return device{Backend: a.Backend}, nil
	case len(a.Devices) == 1:
		return device(a.Devices[0]), nil
	case a.Slots == nil:
		return device{}, fmt.Errorf("this worker has %d devices and no slots to choose one", len(a.Devices))
	}
	w := activity.GetInfo(ctx).WorkflowExecution
	i, ok := a.Slots.Device(w.ID, w.RunID)
	if !ok || i < 0 || i >= len(a.Devices) {
		return device{}, fmt.Errorf("no slot of this worker's %d devices holds a session of workflow %s", len(a.Devices), w.ID)
	}
	return device(a.Devices[i]), nil
}

// device is a trainer.Device with the rule that maps a run's config to it.
type device trainer.Device

// config is the run's config as the device runs it. A run asks for a kind
// of device ("cpu", "cuda", "auto"); on a CUDA device, a run that named
// another ordinal ("cuda:N") runs on the slot's ordinal instead, since the
// slot decides the device (docs/adr/0007-device-slots.md); the trainer's
// Info and its checkpoints record the device that ran.
func (d device) config(cfg config.RunConfig) config.RunConfig {
	if strings.HasPrefix(d.Name, "cuda:") && strings.HasPrefix(cfg.Device, "cuda:") {
		cfg.Device = d.Name
	}
	return cfg
}

// releaseSlot ends the slot hold of the calling run's workflow: its new
// session has its trainer.
func (a *Trainer) releaseSlot(ctx context.Context) {
	if a.Slots != nil {
		a.Slots.Release(activity.GetInfo(ctx).WorkflowExecution.ID)
	}
}

// HoldInput asks to keep this worker's slot, and run RunID's trainer, for
// the next run of the calling workflow for For.
type HoldInput struct {
	RunID string        `json:"run_id"`
	For   time.Duration `json:"for"`
}

// HoldOutput reports whether the worker keeps the slot.
type HoldOutput struct {
	Held bool `json:"held"`
}

// HoldSlot keeps this worker's slot for the next run of the calling
// workflow, which continues as new right after: until that run's session
// here opens its trainer, or for in.For, no other workflow's session is
// admitted to the slot (worker.Slots). A retry holds it again.
func (a *Trainer) HoldSlot(ctx context.Context, in HoldInput) (HoldOutput, error) {
	if a.Slots == nil {
		return HoldOutput{}, nil
	}
	a.Slots.Hold(activity.GetInfo(ctx).WorkflowExecution.ID, in.RunID, in.For)
	return HoldOutput{Held: true}, nil
}

// CloseInput names the run whose trainer to free.
type CloseInput struct {
	RunID string `json:"run_id"`
}

// CloseOutput reports whether a trainer was held.
type CloseOutput struct {
	Closed bool `json:"closed"`
}

// CloseTrainer frees run in.RunID's trainer on this worker, if it holds one.
func (a *Trainer) CloseTrainer(ctx context.Context, in CloseInput) (CloseOutput, error) {
	run := a.Registry.Get(in.RunID)
	if run == nil {
		return CloseOutput{}, nil
	}
	if err := run.Lock(ctx); err != nil {
		return CloseOutput{}, err
	}
	defer run.Unlock()
	a.Registry.Remove(run)
	return CloseOutput{Closed: true}, run.Close()
}

// discard drops a run whose trainer is in an unknown state after a failed
// step. The caller holds the lock.
func (a *Trainer) discard(ctx context.Context, run *Run, cause error) {
	activity.GetLogger(ctx).Warn("Discarding the trainer after a failed step; the workflow restores the last checkpoint",
		"run", run.ID, "at", run.where(), "error", cause)
	a.Registry.Remove(run)
	if err := run.Close(); err != nil {
		activity.GetLogger(ctx).Warn("Closing the discarded trainer failed", "run", run.ID, "error", err)
	}
	if errors.Is(cause, trainer.ErrDevice) {
		if d, ok := a.Slots.(DeviceFailer); ok {
			activity.GetLogger(ctx).Error("The device failed: it takes no more runs until the worker is restarted; the run moves to another slot",
				"run", run.ID, "device", run.Device, "error", cause)
			d.DeviceFailed(run.Device, cause)
		}
	}
}

// DeviceFailer is told when one of the worker's devices fails
// (trainer.ErrDevice), so that its slots take no more runs; device is the
// device's name, as trainer.Device.Name ("" for a worker's only, unnamed
// device). worker.Slots implements it.
type DeviceFailer interface {
	DeviceFailed(device string, cause error)
}

// stepFailed turns a failed trainer step into the activity's error, after
// the trainer was discarded: deterministic failures end the run, the others
// (cancellation included) make the workflow restore the last checkpoint.
func stepFailed(runID, what string, err error) error {
	if e := classify(what, err); IsFatal(e) {
		return e
	}
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("%s: %v; the trainer was discarded, open the run again from its last checkpoint", what, err),
		ErrTypeTrainerLost, err)
}

// progress is the Heartbeat an activity reports, updated as it works.
type progress struct {
	mu sync.Mutex
	hb Heartbeat
}

func (p *progress) update(f func(*Heartbeat)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(&p.hb)
}

func (p *progress) get() Heartbeat {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hb
}

// beat starts heartbeating hb, as later updated through the returned
// progress, every HeartbeatInterval until stop is called. Activities start
// it before they wait for the run's lock, so that waiting for another
// activity of the run (a checkpoint being written) never looks like a dead
// worker, and a worker that dies is noticed within the heartbeat timeout
// even while a backend call runs for minutes without reporting.
func (a *Trainer) beat(ctx context.Context, hb Heartbeat) (p *progress, stop func()) {
	p = &progress{hb: hb}
	return p, a.heartbeat(ctx, func() any { return p.get() })
}

// heartbeat records details() as the activity's heartbeat every
// HeartbeatInterval until the returned function is called.
func (a *Trainer) heartbeat(ctx context.Context, details func() any) (stop func()) {
	every := a.HeartbeatInterval
	if every <= 0 {
		every = time.Second
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx, details())
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func (a *Trainer) prepare(ctx context.Context, cfg config.RunConfig) (*market.Dataset, error) {
	if a.Prepare != nil {
		return a.Prepare(cfg)
	}
	return market.Prepare(ctx, a.Data, cfg)
}

// prepareRun prepares the data a run of cfg trains on: its Dataset, or
// with data.series its panel (market.PreparePanel, the one
// preparation of `dqnflow train` and the walk-forward study's parts) and
// the panel's joined training set.
func (a *Trainer) prepareRun(ctx context.Context, cfg config.RunConfig) (*market.Dataset, *market.Panel, error) {
	if cfg.Data.Series == "" || a.Prepare != nil {
		ds, err := a.prepare(ctx, cfg)
		return ds, nil, err
	}
	pn, err := market.PreparePanel(ctx, a.Data, cfg)
	if err != nil {
		return nil, nil, err
	}
	return pn.Train, pn, nil
}

// checkpoints is the worker's checkpoint store.
func (a *Trainer) checkpoints() *checkpoint.Store {
	if a.Checkpoints == nil {
		return checkpoint.Local("")
	}
	return a.Checkpoints
}

// read loads the checkpoint ref points to, verifying the whole-blob SHA-256
// when the ref carries one (the file's own header and tensor hashes are
// always checked).
func (a *Trainer) read(ctx context.Context, ref CheckpointRef) (*checkpoint.Checkpoint, error) {
	ck, _, err := a.checkpoints().Read(ctx, ref.URI, ref.SHA256)
	return ck, err
}

// previousGood finds the newest checkpoint of the run older than damaged
// beside damaged (same directory or key prefix) whose blob passes every
// check (both integrity hashes, the run id and epoch in its metadata), and
// returns it with a ref (its whole-blob SHA-256 and global step from the
// blob). The blob alone is enough to trust it: its hashes cover every
// byte. nil when none is.
func (a *Trainer) previousGood(ctx context.Context, runID string, damaged CheckpointRef) (*checkpoint.Checkpoint, *CheckpointRef) {
	siblings, err := a.checkpoints().Siblings(ctx, damaged.URI)
	if err != nil {
		return nil, nil
	}
	epochs := map[int]string{}
	var order []int
	for _, uri := range siblings {
		name := checkpoint.Base(uri)
		var n int
		if _, err := fmt.Sscanf(name, "epoch-%06d.safetensors", &n); err == nil &&
			name == fmt.Sprintf("epoch-%06d.safetensors", n) && n < damaged.Epoch {
			epochs[n] = uri
			order = append(order, n)
		}
	}
	slices.Sort(order)
	for _, n := range slices.Backward(order) {
		ck, info, err := a.checkpoints().Read(ctx, epochs[n], "")
		if err != nil {
			continue
		}
		step, err := strconv.ParseInt(ck.Meta[checkpoint.MetaGlobalStep], 10, 64)
		ref := CheckpointRef{RunID: runID, URI: epochs[n], SHA256: info.SHA256, Bytes: info.Bytes, Epoch: n, GlobalStep: step}
		if err != nil || checkMeta(ck, runID, ref) != nil {
			continue
		}
		return ck, &ref
	}
	return nil, nil
}

// readError classifies a checkpoint read failure: a missing file may be
// visible from another worker, a damaged one is damaged everywhere.
func readError(what string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		host, _ := os.Hostname()
		return nonRetryable(ErrTypeCheckpointMissing, what+" on "+host, err,
			"every GPU worker must open the same checkpoint store: one s3:// bucket, or storage mounted at the same path (dqnflow worker --checkpoint-store)")
	}
	if errors.Is(err, checkpoint.ErrCorrupt) || errors.Is(err, checkpoint.ErrOutsideRoot) {
		return classify(what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// checkMeta checks that ck is the checkpoint ref describes: same run and
// epoch in its metadata (when present).
func checkMeta(ck *checkpoint.Checkpoint, runID string, ref CheckpointRef) error {
	if id := ck.Meta[checkpoint.MetaRunID]; id != "" && id != runID {
		return fmt.Errorf("checkpoint metadata names run %q, want %q", id, runID)
	}
	if e := ck.Meta[checkpoint.MetaEpoch]; e != "" && e != strconv.Itoa(ref.Epoch) {
		return fmt.Errorf("checkpoint metadata says epoch %s, the run recorded epoch %d", e, ref.Epoch)
	}
	return nil
}
