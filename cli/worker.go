package cli

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/store"
	"github.com/dqnflow/dqnflow/temporalconn"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/faults"
	"github.com/dqnflow/dqnflow/worker"
)

// envCheckpointStore is the default of --checkpoint-store; envCheckpointDir,
// its older name, is read when it is unset.
const (
	envCheckpointStore = "DQNFLOW_CHECKPOINT_STORE"
	envCheckpointDir   = "DQNFLOW_CHECKPOINT_DIR"
)

// defaultCheckpointStore is the default of --checkpoint-store.
func defaultCheckpointStore() string {
	return getenv(envCheckpointStore, getenv(envCheckpointDir, "."))
}

func getenv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// dial connects to Temporal with clientOptions.
func dial(ctx context.Context, e *env) (client.Client, error) {
	opts, err := clientOptions(e)
	if err != nil {
		return nil, err
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s (flag --address or $%s, or start a local server with \"dqnflow dev\"): %w",
			opts.HostPort, temporalconn.EnvAddress, err)
	}
	return c, nil
}

// migrateCmd is "dqnflow migrate".
func migrateCmd(e *env) *cobra.Command {
	cmd := leaf("migrate",
		"apply the metadata store's migrations (DATABASE_URL)",
		"migrate brings the metadata store's schema up to date: the PostgreSQL database DATABASE_URL names, or an SQLite file (sqlite:PATH).",
		"DATABASE_URL=postgres://user@db:5432/dqnflow dqnflow migrate")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		loc := store.Location{URL: store.URLFromEnv()}
		if err := store.MigrateLocation(ctx, loc); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "migrations applied to %s\n", loc)
		return nil
	}
	return cmd
}

// workerFlags are the flags of "dqnflow worker", shared with "dqnflow dev".
type workerFlags struct {
	role, device, checkpointStore string
	devices                       deviceFlags
	metricsAddr                   string
	data                          *dataFlags
	// src is the Source of data; set by openData.
	src prices.Source
	// metrics receives the trainer's measurements; set by startMetrics.
	metrics *worker.Metrics
}

// register adds the worker's flags to fs: with fsRole, "dqnflow worker"'s
// (--role among them); without, "dqnflow dev"'s, whose help lists them
// under their own heading. The older names --checkpoint-dir and --slots
// still work and are left out of help.
func (w *workerFlags) register(fsRole bool, fs *pflag.FlagSet) {
	before := map[string]bool{}
	fs.VisitAll(func(f *pflag.Flag) { before[f.Name] = true })
	if fsRole {
		fs.StringVar(&w.role, "role", "all", "task queues to serve: all, control or gpu")
		flagValues(fs, "role", "all", "control", "gpu")
	}
	fs.StringVar(&w.device, "device", "auto", "trainer devices: cuda (every GPU of the host), cuda:N (GPU N), auto (the GPUs, or the CPU without), cpu")
	flagValues(fs, "device", deviceValues...)
	w.devices.register(fs)
	fs.StringVar(&w.checkpointStore, "checkpoint-store", defaultCheckpointStore(),
		"where checkpoints live: a directory, file:///dir, or s3://bucket/prefix?endpoint=URL (credentials from AWS_* variables or ~/.aws); every worker of a deployment names the same one (--checkpoint-dir is its older name)")
	fs.StringVar(&w.checkpointStore, "checkpoint-dir", defaultCheckpointStore(), "the older name of --checkpoint-store")
	fs.MarkHidden("checkpoint-dir")
	w.data = addDataFlags(fs)
	metricsDefault := defaultDevMetricsAddr // dev
	if fsRole {
		metricsDefault = "" // a worker serves metrics when asked: several may share a host
	}
	fs.StringVar(&w.metricsAddr, "metrics-addr", metricsDefault, "serve Prometheus metrics, without authentication, at this host:port: \":9464\" is the loopback interface, \"0.0.0.0:9464\" or \"[::]:9464\" every interface (\"\": none)")
	if !fsRole {
		fs.VisitAll(func(f *pflag.Flag) {
			if !before[f.Name] {
				groupFlags(fs, "Worker", f.Name)
			}
		})
	}
}

// checkpointOptions are the checkpoint options of the command's flags for
// a worker of wf's role: one that trains (role all or gpu) writes
// checkpoints and so needs the private key when it has a key at all.
// The worker commands call it first, so that a wrong key file fails in
// the first second.
func (wf workerFlags) checkpointOptions(e *env) (checkpoint.Options, error) {
	opt, err := e.ckpt.options()
	if err != nil {
		return opt, err
	}
	if opt.Keys != nil && !opt.Keys.CanSign() && wf.role != string(worker.RoleControl) {
		return opt, fmt.Errorf("%w: flag --checkpoint-key-file: %s: a worker of role %s writes checkpoints and needs the private key (a public key is enough for --role control and for commands that only read)", errUsage, opt.Keys, wf.role)
	}
	return opt, nil
}

// openData sets w.src from the data flags and checks the checkpoint
// flags (checkpointOptions), so that a data root that does not exist or
// a wrong key file fails the start before anything is connected.
func (w *workerFlags) openData(e *env) (err error) {
	if w.src, err = w.data.source(); err != nil {
		return err
	}
	_, err = w.checkpointOptions(e)
	return err
}

// startWorker starts the workers of one process on devices
// (workerFlags.openDevices) with worker.Start; stop them with Stop.
func startWorker(ctx context.Context, e *env, c client.Client, st store.Metadata, wf workerFlags, devices []trainer.Device) (*worker.Worker, error) {
	opt, err := wf.checkpointOptions(e)
	if err != nil {
		return nil, err
	}
	o := worker.StartOptions{
		Config:   worker.Config{Devices: devices, RunsPerDevice: wf.devices.runsPerDevice(), Store: st, Data: wf.src},
		RoleName: wf.role, CheckpointStore: wf.checkpointStore, Checkpoint: opt, OpenCheckpoints: openCheckpointStore,
		FaultPlan: os.Getenv(faults.EnvPlan), Log: e.stderr, Address: e.conn.address(), Namespace: e.conn.namespace(),
	}
	if wf.metrics != nil {
		o.TrainerMetrics = wf.metrics
	}
	return worker.Start(ctx, c, o)
}

// workerCmd is "dqnflow worker": serves until interrupted.
func workerCmd(e *env) *cobra.Command {
	cmd := leaf("worker",
		"a worker: serve the control or GPU task queue, or both",
		"worker serves dqnflow's task queues until interrupted: the workflows and light activities (--role control), the training on this host's devices (--role gpu), or both.",
		"dqnflow worker --role control",
		"dqnflow worker --role gpu --device cuda --runs-per-device 2 --metrics-addr 0.0.0.0:9464 --checkpoint-store /mnt/ckpt --data-root /mnt/prices   # metrics on every interface, for a Prometheus elsewhere",
		"dqnflow worker --role gpu --device cuda --checkpoint-store 's3://dqnflow/ckpt?endpoint=http://s3:7070&use_path_style=true'  # AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY in the environment")
	fs := cmd.Flags()
	e.conn.register(fs)
	var wf workerFlags
	wf.register(true, fs)
	e.ckpt.register(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		if err := wf.openData(e); err != nil {
			return err
		}
		devices, err := wf.openDevices(e)
		if err != nil {
			return err
		}
		st, err := openStore(ctx, e, true)
		if err != nil {
			return err
		}
		defer st.Close()
		if wf.metrics, _, err = startMetrics(ctx, e, wf.metricsAddr, false); err != nil {
			return err
		}
		c, err := dial(ctx, e)
		if err != nil {
			return err
		}
		defer c.Close()
		w, err := startWorker(ctx, e, c, st, wf, devices)
		if err != nil {
			return err
		}
		<-ctx.Done()
		fmt.Fprintln(e.stderr, "worker: stopping")
		stopCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return w.Stop(stopCtx)
	}
	return cmd
}
