package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/store"
	"github.com/dqnflow/dqnflow/workflows"
)

// runRun implements "dqnflow run start|list|show|watch|compare|pause|resume|stop".
func runRun(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: want \"dqnflow run start|list|show|watch|compare|pause|resume|stop ...\"", errUsage)
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "start":
		return runStart(ctx, e, rest)
	case "list":
		return runList(ctx, e, rest)
	case "show":
		return runShow(ctx, e, rest)
	case "watch":
		return runWatch(ctx, e, rest)
	case "compare":
		return runCompare(ctx, e, rest)
	case "pause", "resume", "stop":
		return runSignal(ctx, e, sub, rest)
	}
	return fmt.Errorf("%w: unknown run command %q: want start, list, show, watch, compare, pause, resume or stop", errUsage, sub)
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
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: id, TaskQueue: workflows.ControlTaskQueue,
		WorkflowIDReusePolicy: enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
	}, name, arg)
	if err != nil {
		return nil, fmt.Errorf("start %s %s: %w", name, id, err)
	}
	return run, nil
}

func runStart(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "run start")
	cfgPath := fs.String("config", "", "RunConfig JSON file (default: built-in defaults)")
	id := fs.String("id", "", "run id (default: run-<time>-<random>)")
	wait := fs.Bool("wait", false, "block until the run ends and print its final status")
	jsonOut := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
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
			return printJSON(e, map[string]string{"run_id": *id})
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
		if perr := printJSON(e, out); perr != nil {
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

func runList(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "run list")
	limit := fs.Int("limit", 20, "most runs to list, newest first (0: all)")
	lineage := fs.String("lineage", "", "only runs of this lineage")
	jsonOut := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
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
		return printJSON(e, runs)
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

// progress queries the run's progress and, while an epoch trains, the
// latest heartbeat of its TrainEpoch or RunEpochs activity (epoch, stage,
// step and loss as of the last heartbeat that reached the server).
func progress(ctx context.Context, c client.Client, id string) (workflows.Progress, *activities.Heartbeat, error) {
	var p workflows.Progress
	v, err := c.QueryWorkflow(ctx, id, "", workflows.ProgressQuery)
	if err != nil {
		return p, nil, fmt.Errorf("query run %s: %w", id, err)
	}
	if err := v.Get(&p); err != nil {
		return p, nil, fmt.Errorf("decode progress of run %s: %w", id, err)
	}
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return p, nil, nil
	}
	for _, pa := range desc.GetPendingActivities() {
		if name := pa.GetActivityType().GetName(); (name != "TrainEpoch" && name != "RunEpochs") || pa.GetHeartbeatDetails() == nil {
			continue
		}
		var hb activities.Heartbeat
		if pl := pa.GetHeartbeatDetails().GetPayloads(); len(pl) > 0 {
			if err := converter.GetDefaultDataConverter().FromPayload(pl[0], &hb); err == nil {
				return p, &hb, nil
			}
		}
	}
	return p, nil, nil
}

func printProgress(e *env, p workflows.Progress, live *activities.Heartbeat) {
	fmt.Fprintf(e.stdout, "run %s [%s] %s: epoch %d/%d, step %d", p.RunID, p.Status, p.Phase, p.Epoch, p.Epochs, p.Step)
	if p.Epoch > 0 {
		fmt.Fprintf(e.stdout, ", loss %.4f", p.Loss)
	}
	if p.BestEpoch > 0 {
		fmt.Fprintf(e.stdout, ", best validation Sharpe %.3f (epoch %d), last %.3f", p.BestValidSharpe, p.BestEpoch, p.LastValidSharpe)
	}
	if live != nil {
		fmt.Fprintf(e.stdout, "; now: epoch %d %s step %d/%d, loss %.4f", live.Epoch, live.Stage, live.Step, live.Steps, live.Loss)
	}
	if p.Device != "" {
		fmt.Fprintf(e.stdout, "; %s backend on %s, %s", p.Backend, p.Device, p.Precision)
	}
	if p.Recoveries > 0 {
		fmt.Fprintf(e.stdout, "; %d recoveries", p.Recoveries)
	}
	fmt.Fprintln(e.stdout)
}

func ckURI(r *activities.CheckpointRef) string {
	if r == nil {
		return "-"
	}
	return r.URI
}

func runSignal(ctx context.Context, e *env, sub string, args []string) error {
	fs := newFlags(e, "run "+sub)
	if err := parse(fs, args, 1); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: want \"dqnflow run %s RUN\"", errUsage, sub)
	}
	c, err := dial(ctx, e)
	if err != nil {
		return err
	}
	defer c.Close()
	signal := map[string]string{"pause": workflows.PauseSignal, "resume": workflows.ResumeSignal, "stop": workflows.StopSignal}[sub]
	if err := c.SignalWorkflow(ctx, fs.Arg(0), "", signal, nil); err != nil {
		return fmt.Errorf("signal %s to run %s: %w", signal, fs.Arg(0), err)
	}
	fmt.Fprintf(e.stdout, "sent %s to run %s (it takes effect at the next epoch boundary)\n", signal, fs.Arg(0))
	return nil
}
