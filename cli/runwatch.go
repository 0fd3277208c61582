package cli

import (
	"context"

	"github.com/dqnflow/dqnflow/internal/progress"
	"github.com/dqnflow/dqnflow/runview"
	"github.com/dqnflow/dqnflow/workflows"
	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
)

// runWatchCmd is "dqnflow run watch RUN [--json]": a live line for
// the epoch in training (step, steps/s, loss, ε, validation Sharpe) that
// changes in place on a terminal, a line per finished epoch, and the
// result when the run ends. Without a terminal (a log) it prints plain
// lines: one per epoch and one per change of status or phase.
func runWatchCmd(e *env) *cobra.Command {
	cmd := leaf("watch RUN",
		"live progress of a run until it ends",
		"watch shows a run's progress until it ends: a line per finished epoch, the epoch in training redrawn in place on a terminal, then the result.",
		"dqnflow run watch lr-3e-4")
	fs := cmd.Flags()
	e.conn.register(fs)
	jsonOut := fs.Bool("json", false, "print a JSON object per change (progress and the live heartbeat)")
	cmd.Args = argsBetween(1, 1)
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx := cmd.Context()
		c, err := dial(ctx, e)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = watchRun(ctx, e, c, pos[0], *jsonOut)
		return err
	}
	return cmd
}

// watchRun is runview.Watch with the command's streams and store: the
// run's progress until it ends, then its result.
func watchRun(ctx context.Context, e *env, c client.Client, id string, jsonOut bool) (workflows.RunResult, error) {
	st, err := openReader(ctx, e)
	if err == nil {
		defer st.Close()
	}
	return runview.Watch(ctx, c, id, runview.WatchOptions{Store: st, StoreErr: err, Where: where(e),
		Stdout: e.stdout, Stderr: e.stderr, TTY: progress.IsTerminal(e.stdout), JSON: jsonOut})
}

// where is the Temporal server of the connection flags, for errors.
func where(e *env) runview.Where {
	return runview.Where{Address: e.conn.address(), Namespace: e.conn.namespace()}
}
