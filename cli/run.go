package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/internal/jsonfile"
	"github.com/dqnflow/dqnflow/store"
	"github.com/dqnflow/dqnflow/workflows"
)

// runCmd is "dqnflow run start|list|show|watch|compare|pause|resume|stop":
// runs on Temporal.
func runCmd(e *env) *cobra.Command {
	return group("run", "runs on Temporal: start, list, show, watch, compare, pause, resume, stop",
		"run starts TrainingRun workflows on Temporal and shows, compares and steers them.",
		runStartCmd(e), runListCmd(e), runShowCmd(e), runWatchCmd(e), runCompareCmd(e),
		runSignalCmd(e, "pause", "checkpoint the run, free its trainer and wait for resume"),
		runSignalCmd(e, "resume", "resume a paused run"),
		runSignalCmd(e, "stop", "stop a run: a final checkpoint and backtest, then it completes"))
}

// newRunID returns "<prefix>-<UTC time>-<4 random bytes>".
func newRunID(prefix string) string {
	var b [4]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s-%s-%s", prefix, time.Now().UTC().Format("20060102-150405"), hex.EncodeToString(b[:]))
}

// startRun starts TrainingRun(cfg) with workflow id id.
func startRun(ctx context.Context, c client.Client, id string, cfg config.RunConfig) error {
	_, err := startWorkflow(ctx, c, id, workflows.TrainingRunName, cfg)
	return err
}

// startWorkflow starts workflow name with input arg and workflow id id on
// the control queue. An id that was used before is refused: a run id names
// a checkpoint directory and rows that a second run must not overwrite.
func startWorkflow(ctx context.Context, c client.Client, id, name string, arg any) (client.WorkflowRun, error) {
	return startWorkflowReusing(ctx, c, id, name, arg, enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE)
}

// startWorkflowReusing is startWorkflow with the id reuse policy given:
// ALLOW_DUPLICATE starts a new execution under the id of one that has
// ended (a walk-forward study resumed).
func startWorkflowReusing(ctx context.Context, c client.Client, id, name string, arg any, policy enums.WorkflowIdReusePolicy) (client.WorkflowRun, error) {
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: id, TaskQueue: workflows.ControlTaskQueue, WorkflowIDReusePolicy: policy,
	}, name, arg)
	if err != nil {
		return nil, fmt.Errorf("start %s %s: %w", name, id, err)
	}
	return run, nil
}

func runStartCmd(e *env) *cobra.Command {
	cmd := leaf("start",
		"start a TrainingRun; prints its id",
		"start starts a TrainingRun workflow with the config (the defaults without --config) and prints the run id; with --wait it also waits for the result.",
		"dqnflow run start                               # the defaults on the bundled S&P 500 data",
		"dqnflow run start --config my.json --id lr-3e-4 --wait")
	fs := cmd.Flags()
	e.conn.register(fs)
	cfgPath := fs.String("config", "", "RunConfig JSON file (default: built-in defaults)")
	id := fs.String("id", "", "run id (default: run-<time>-<random>)")
	wait := fs.Bool("wait", false, "block until the run ends and print its final status")
	jsonOut := fs.Bool("json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		cfg, err := config.Load(*cfgPath)
		if err != nil {
			return err
		}
		if w := precisionWarning(cfg); w != "" {
			fmt.Fprintln(e.stderr, w)
		}
		if *id == "" {
			*id = newRunID("run")
		}
		c, err := dial(ctx, e)
		if err != nil {
			return err
		}
		defer c.Close()
		if err := startRun(ctx, c, *id, cfg); err != nil {
			return err
		}
		if !*wait {
			if *jsonOut {
				return jsonfile.Print(e.stdout, map[string]string{"run_id": *id})
			}
			fmt.Fprintln(e.stdout, *id)
			return nil
		}
		if !*jsonOut {
			fmt.Fprintln(e.stdout, *id)
		}
		var res workflows.RunResult
		err = c.GetWorkflow(ctx, *id, "").Get(ctx, &res)
		if *jsonOut {
			out := map[string]any{"run_id": *id, "result": res}
			if err != nil {
				out["status"], out["error"] = "failed", err.Error()
			} else {
				out["status"] = res.Status
			}
			if perr := jsonfile.Print(e.stdout, out); perr != nil {
				return perr
			}
			return err
		}
		if err != nil {
			return fmt.Errorf("run %s failed: %w", *id, err)
		}
		fmt.Fprintf(e.stdout, "run %s %s: %d epochs, best validation Sharpe %.3f at epoch %d\n", *id, res.Status, res.Epochs, res.BestValidSharpe, res.BestEpoch)
		return nil
	}
	return cmd
}

func runListCmd(e *env) *cobra.Command {
	cmd := leaf("list",
		"runs from the metadata store, newest first",
		"list prints the runs the metadata store holds, newest first: status, epochs, best validation Sharpe, precision, creation time.",
		"dqnflow run list",
		"dqnflow run list --lineage daily --limit 5 --json")
	fs := cmd.Flags()
	e.conn.register(fs)
	limit := fs.Int("limit", 20, "most runs to list, newest first (0: all)")
	lineage := fs.String("lineage", "", "only runs of this lineage")
	jsonOut := fs.Bool("json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		st, err := openReader(ctx, e)
		if err != nil {
			return err
		}
		defer st.Close()
		runs, err := st.ListRuns(ctx, store.RunFilter{Lineage: *lineage, Limit: *limit})
		if err != nil {
			return err
		}
		if *jsonOut {
			return jsonfile.Print(e.stdout, runs)
		}
		fmt.Fprintf(e.stdout, "%-36s %-14s %7s %9s %-10s %s\n", "run", "status", "epochs", "best", "precision", "created")
		for _, r := range runs {
			best := "-"
			if r.BestValidSharpe != nil {
				best = fmt.Sprintf("%.3f", *r.BestValidSharpe)
			}
			fmt.Fprintf(e.stdout, "%-36s %-14s %7d %9s %-10s %s\n", r.RunID, r.Status, r.EpochsDone, best, r.Precision, r.CreatedAt.Format(time.RFC3339))
		}
		return nil
	}
	return cmd
}

// runSignalCmd is "dqnflow run pause|resume|stop RUN" (sub), which sends
// the run's workflow that signal.
func runSignalCmd(e *env, sub, short string) *cobra.Command {
	cmd := leaf(sub+" RUN", short, sub+": "+short+". The signal takes effect at the next epoch boundary.",
		"dqnflow run "+sub+" lr-3e-4")
	cmd.Args = argsBetween(1, 1)
	e.conn.register(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		c, err := dial(ctx, e)
		if err != nil {
			return err
		}
		defer c.Close()
		signal := map[string]string{"pause": workflows.PauseSignal, "resume": workflows.ResumeSignal, "stop": workflows.StopSignal}[sub]
		if err := c.SignalWorkflow(ctx, args[0], "", signal, nil); err != nil {
			return fmt.Errorf("signal %s to run %s: %w", signal, args[0], err)
		}
		fmt.Fprintf(e.stdout, "sent %s to run %s (it takes effect at the next epoch boundary)\n", signal, args[0])
		return nil
	}
	return cmd
}
