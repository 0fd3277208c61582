package cli

import (
	"context"
	"time"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/internal/jsonfile"
	"github.com/dqnflow/dqnflow/runview"
	"github.com/dqnflow/dqnflow/workflows"
	"github.com/spf13/cobra"
)

// runShowCmd is "dqnflow run show RUN [--json]": the config that ran,
// backend, device and precision, a table of epochs, the checkpoints (best
// marked) and the backtests, from the metadata store; and, while the run
// lives, its progress from Temporal.
func runShowCmd(e *env) *cobra.Command {
	cmd := leaf("show RUN",
		"a run: config, device, epochs, checkpoints, backtests",
		"show prints a run's progress while it lives (from Temporal) and what the metadata store holds: the config that ran, backend, device and precision, epochs, checkpoints (best marked) and backtests.",
		"dqnflow run show lr-3e-4",
		"dqnflow run show lr-3e-4 --json | jq '.epochs[-1]'")
	fs := cmd.Flags()
	e.conn.register(fs)
	jsonOut := fs.Bool("json", false, "print everything as one JSON object")
	cmd.Args = argsBetween(1, 1)
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx := cmd.Context()
		id := pos[0]

		// Temporal answers while a worker runs the workflow; the store answers
		// for every run it recorded. Either is enough, both are better.
		var p *workflows.Progress
		var live *activities.Heartbeat
		var queryErr error
		if c, err := dial(ctx, e); err != nil {
			queryErr = err
		} else {
			qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			var prog workflows.Progress
			prog, live, queryErr = runview.Progress(qctx, c, id)
			cancel()
			c.Close()
			if queryErr == nil {
				p = &prog
			}
		}
		var rec *runview.Record
		storeErr := func() error {
			st, err := openReader(ctx, e)
			if err != nil {
				return err
			}
			defer st.Close()
			// A run keyed "<workflow id>.<execution id>" is found by either.
			key := id
			if p != nil && p.RunID != "" {
				key = p.RunID
			}
			r, err := runview.Load(ctx, st, key)
			if err != nil {
				return err
			}
			rec = &r
			return nil
		}()
		shown := runview.Shown{ID: id, Progress: p, Live: live, QueryErr: queryErr, Record: rec, StoreErr: storeErr}
		if err := shown.Err(where(e)); err != nil {
			return err
		}
		if *jsonOut {
			return jsonfile.Print(e.stdout, shown.JSON())
		}
		shown.Print(e.stdout, e.stderr)
		return nil
	}
	return cmd
}

// runCompareCmd is "dqnflow run compare RUN RUN...": the runs side by
// side, the config keys whose values differ, and each run's best and final
// metrics.
func runCompareCmd(e *env) *cobra.Command {
	cmd := leaf("compare RUN RUN...",
		"runs side by side: best and final metrics, config differences",
		"compare prints runs side by side: status, device, best and final metrics, and the config keys whose values differ.",
		"dqnflow run compare lr-3e-4 lr-1e-3",
		"dqnflow run compare A B C --json")
	fs := cmd.Flags()
	e.conn.register(fs)
	jsonOut := fs.Bool("json", false, "print JSON")
	cmd.Args = argsBetween(2, 64)
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx := cmd.Context()
		st, err := openReader(ctx, e)
		if err != nil {
			return err
		}
		defer st.Close()
		var recs []runview.Record
		for _, id := range pos {
			r, err := runview.Load(ctx, st, id)
			if err != nil {
				return err
			}
			recs = append(recs, r)
		}
		cmp := runview.Compare(recs)
		if *jsonOut {
			return jsonfile.Print(e.stdout, cmp)
		}
		runview.PrintComparison(e.stdout, cmp)
		return nil
	}
	return cmd
}
