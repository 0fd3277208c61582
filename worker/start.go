package worker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/internal/usage"
	"github.com/dqnflow/dqnflow/trainer/faults"
	"github.com/dqnflow/dqnflow/workflows"
)

// StartOptions are what Start needs besides the client: the Config
// (without Role, Checkpoints and Logger, which Start fills) and the
// settings a front end takes from its flags and environment.
type StartOptions struct {
	Config
	// RoleName is the role as given (--role): all, control or gpu.
	RoleName string
	// CheckpointStore is the checkpoint store's location (--checkpoint-store),
	// opened with Checkpoint through OpenCheckpoints.
	CheckpointStore string
	Checkpoint      checkpoint.Options
	OpenCheckpoints func(context.Context, string, checkpoint.Options) (*checkpoint.Store, error)
	// FaultPlan is $DQNFLOW_FAULT_PLAN (faults.EnvPlan): "" for none.
	FaultPlan string
	// Log receives the start line and the workers' log at info level.
	Log io.Writer
	// Address and Namespace name the Temporal server in the start line.
	Address, Namespace string
}

// Start builds and starts the workers of one process on o.Devices; stop
// them with Stop. The fault plan, when given, wraps every device's
// backend and is announced; the checkpoint store is opened and checked;
// the role, queues, server, store, data and signing are logged, never
// silent.
func Start(ctx context.Context, c client.Client, o StartOptions) (*Worker, error) {
	role, err := ParseRole(o.RoleName)
	if err != nil {
		return nil, fmt.Errorf("%w: flag --role: %v", usage.Err, err)
	}
	devices := o.Devices
	var faultPlan faults.Plan
	if o.FaultPlan != "" && len(devices) > 0 {
		p, err := faults.Parse(o.FaultPlan)
		if err != nil {
			return nil, err
		}
		faultPlan = p
		for i := range devices {
			devices[i].Backend = &faults.Backend{Backend: devices[i].Backend, Plan: p, Device: devices[i].Name}
		}
		fmt.Fprintf(o.Log, "worker: FAULT INJECTION ON (%s=%s): for tests only\n", faults.EnvPlan, o.FaultPlan)
	}
	ckStore, err := o.OpenCheckpoints(ctx, o.CheckpointStore, o.Checkpoint)
	if err != nil {
		return nil, fmt.Errorf("%w: flag --checkpoint-store: %v", usage.Err, err)
	}
	ckStore.Hook = faultPlan.WriteHook(o.Log)
	if err := ckStore.Check(ctx); err != nil {
		ckStore.Close()
		return nil, err
	}
	cfg := o.Config
	cfg.Role, cfg.Devices, cfg.Checkpoints = role, devices, ckStore
	cfg.Logger = tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(o.Log, &slog.HandlerOptions{Level: slog.LevelInfo})))
	w, err := New(c, cfg)
	if err != nil {
		ckStore.Close()
		return nil, err
	}
	if err := w.Start(); err != nil {
		ckStore.Close()
		return nil, err
	}
	queues := map[Role]string{
		RoleAll:     workflows.ControlTaskQueue + " and " + workflows.GPUTaskQueue,
		RoleControl: workflows.ControlTaskQueue,
		RoleGPU:     workflows.GPUTaskQueue,
	}[role]
	signing := "checkpoints unsigned (no --checkpoint-key-file)"
	if o.Checkpoint.Keys != nil {
		signing = "checkpoints signed and verified with " + o.Checkpoint.Keys.String()
	}
	fmt.Fprintf(o.Log, "worker: role %s serving %s at %s, namespace %s, checkpoints in %s, %s, %s\n", role, queues, o.Address, o.Namespace, storeWhere(ckStore), o.Data.Describe(), signing)
	return w, nil
}

// storeWhere names a checkpoint store for the log: an object store by its
// URL, a directory by its absolute path (as "dqnflow doctor" does), so
// that workers on several hosts can be seen to share it.
func storeWhere(s *checkpoint.Store) string {
	where := s.String()
	if s.Remote() || strings.Contains(where, "://") {
		return where
	}
	if abs, err := filepath.Abs(where); err == nil {
		return abs
	}
	return where
}
