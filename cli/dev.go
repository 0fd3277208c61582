package cli

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/dqnflow/dqnflow/devstack"
	"github.com/dqnflow/dqnflow/localrun"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/report"
	"github.com/dqnflow/dqnflow/research/evaluation"
	"github.com/dqnflow/dqnflow/store"
	"github.com/dqnflow/dqnflow/temporalconn"
	"github.com/dqnflow/dqnflow/worker"
)

// envTemporalBin names the Temporal CLI binary that "dqnflow dev" starts.
const envTemporalBin = "DQNFLOW_TEMPORAL"

// findTemporal is devstack.FindTemporal with the flag's value and
// $DQNFLOW_TEMPORAL.
func findTemporal(flagValue string) (string, error) {
	return devstack.FindTemporal(flagValue, os.Getenv(envTemporalBin), envTemporalBin)
}

// devCmd is "dqnflow dev": the pinned Temporal dev server with its
// UI and a SQLite file, the PostgreSQL migrations, and a worker serving
// every queue, all in the foreground until interrupted. With --demo it also
// starts a small TrainingRun and prints its progress and result.
func devCmd(e *env) *cobra.Command {
	cmd := leaf("dev",
		"the local stack: Temporal dev server and UI, migrations, a worker",
		"dev runs the pinned Temporal dev server with its UI, applies the metadata store's migrations and serves every task queue with a worker, in the foreground until interrupted. With --demo it also starts a small run and watches it.",
		"dqnflow dev               # Temporal + UI on :8233, a worker, metrics on :9464",
		"dqnflow dev --demo        # and a small demo run, watched to the end",
		"DATABASE_URL=postgres://user@db/dqnflow dqnflow dev --metrics-addr :9500")
	fs := cmd.Flags()
	var wf workerFlags
	wf.register(false, fs)
	e.ckpt.register(fs)
	groupFlags(fs, "Worker", "checkpoint-key-file", "checkpoint-max-bytes")
	wf.role = "all"
	port := fs.Int("port", 7233, "Temporal frontend port")
	uiPort := fs.Int("ui-port", 8233, "Temporal UI port")
	dbFile := fs.String("db-file", ".dqnflow/temporal.db", "Temporal's SQLite file (kept between runs)")
	temporalBin := fs.String("temporal", "", "Temporal CLI binary (default: $"+envTemporalBin+", bin/temporal beside dqnflow, or temporal on PATH)")
	demo := fs.Bool("demo", false, "start a small demo TrainingRun and watch it")
	exitAfterDemo := fs.Bool("exit-after-demo", false, "with --demo: stop everything when the demo run ends")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		// Which metadata store is dev's first line (the README says so):
		// where the runs' records go is what a new user looks for first.
		// The devices are opened before anything is connected to, so that
		// one that cannot run fails the start at once.
		if err := wf.openData(e); err != nil {
			return err
		}
		loc, err := locateStore(ctx, e, true)
		if err != nil {
			return err
		}
		devices, err := wf.openDevices(e)
		if err != nil {
			return err
		}
		bin, err := findTemporal(*temporalBin)
		if err != nil {
			return err
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(*port))
		os.Setenv(temporalconn.EnvAddress, addr)
		e.conn.local = true // its own plain-text server, whatever the environment says of others
		if err := os.MkdirAll(filepath.Dir(*dbFile), 0o755); err != nil {
			return fmt.Errorf("create directory for %s: %w", *dbFile, err)
		}
		st, err := store.Connect(ctx, loc)
		if err != nil {
			return err
		}
		defer st.Close()

		var metricsURL string
		if wf.metrics, metricsURL, err = startMetrics(ctx, e, wf.metricsAddr, wf.metricsAddr == defaultDevMetricsAddr); err != nil {
			return err
		}
		srv, err := devstack.StartServer(e.stderr, bin, *port, *uiPort, *dbFile)
		if err != nil {
			return err
		}
		defer srv.Stop()
		opts, err := clientOptions(e)
		if err != nil {
			return err
		}
		c, err := worker.DialWhenReady(ctx, opts, 90*time.Second, srv.Alive)
		if err != nil {
			return err
		}
		defer c.Close()
		if err := worker.EnsureSearchAttributes(ctx, c, e.conn.namespace()); err != nil {
			return err
		}
		w, err := startWorker(ctx, e, c, st, wf, devices)
		if err != nil {
			return err
		}
		defer func() {
			stopCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			w.Stop(stopCtx)
		}()
		ui := fmt.Sprintf("http://localhost:%d", *uiPort)
		fmt.Fprintf(e.stdout, "dqnflow dev is up: Temporal at %s, UI at %s\n", addr, ui)
		if metricsURL != "" {
			fmt.Fprintf(e.stdout, "Prometheus metrics (Temporal SDK and trainer) at %s\n", metricsURL)
		}
		fmt.Fprintf(e.stdout, "Start a run: dqnflow run start, or in the UI: Start Workflow, type TrainingRun, task queue dqnflow-control, input {}\n")

		if *demo {
			if err := runDemo(ctx, e, c, ui); err != nil {
				return err
			}
			if *exitAfterDemo {
				return nil
			}
		}
		fmt.Fprintln(e.stdout, "Press Ctrl-C to stop.")
		<-ctx.Done()
		fmt.Fprintln(e.stderr, "dev: stopping")
		return nil
	}
	return cmd
}

func runDemo(ctx context.Context, e *env, c client.Client, ui string) error {
	cfg := devstack.DemoConfig()
	id := newRunID("demo")
	if err := startRun(ctx, c, id, cfg); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "demo run %s started: %d epochs of %d steps on %s; watch it at %s/namespaces/%s/workflows/%s\n",
		id, cfg.Epochs, cfg.StepsPerEpoch, cfg.Data.Path, ui, e.conn.namespace(), id)
	res, err := watchRun(ctx, e, c, id, false)
	if err != nil || res.LastCheckpoint == nil {
		return err
	}
	// The checkpoint validation picked (else the last), on the held-out
	// test range, beside buy-and-hold and flat (what "dqnflow backtest"
	// prints).
	ck := res.LastCheckpoint
	if res.BestCheckpoint != nil {
		ck = res.BestCheckpoint
	}
	var bundled prices.Source // the demo's data is bundled: nothing is read from disk
	pol, ds, r, what, rec, err := openPolicyData(ctx, e, bundled, ck.URI, cfg.Data.Path, "test", "", "", nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s, epoch %d's checkpoint; instrument %s\n", what, ck.Epoch, localrun.DescribeInstrument(ds))
	if n := evaluation.FlatNotice(rec); n != "" {
		fmt.Fprintln(e.stdout, n)
	}
	rep, err := pol.Backtest(ds, r)
	if err != nil {
		return err
	}
	report.PrintBacktest(e.stdout, rep)
	return nil
}
