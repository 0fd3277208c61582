package cli

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/internal/jsonfile"
	"github.com/dqnflow/dqnflow/workflows"
)

// gridFlag collects repeated --grid PATH=V1,V2 flags.
type gridFlag map[string][]json.RawMessage

func (g gridFlag) String() string { return "" }

// Type is what help shows as the flag's value.
func (g gridFlag) Type() string { return "PATH=V1,V2" }

func (g gridFlag) Set(s string) error {
	path, vals, ok := strings.Cut(s, "=")
	if !ok || path == "" || vals == "" {
		return fmt.Errorf("want PATH=V1,V2,... (for example optim.lr=1e-4,3e-4), got %q", s)
	}
	for _, v := range strings.Split(vals, ",") {
		v = strings.TrimSpace(v)
		if !json.Valid([]byte(v)) {
			v = fmt.Sprintf("%q", v) // a bare word is a string value
		}
		g[path] = append(g[path], json.RawMessage(v))
	}
	return nil
}

// sweepCmd is "dqnflow sweep start".
func sweepCmd(e *env) *cobra.Command {
	return group("sweep", "grid search: start",
		"sweep runs a Sweep workflow: a child TrainingRun per point of a grid of config values, at most --max-concurrent at a time, and picks the best.",
		sweepStartCmd(e))
}

// sweepStartCmd is "dqnflow sweep start".
func sweepStartCmd(e *env) *cobra.Command {
	cmd := leaf("start",
		"start a sweep over a grid of config values",
		"start starts a Sweep: one TrainingRun per point of the grid (every combination of the --grid values) on the base config, at most --max-concurrent at a time. Its runs are named <sweep id>-<8 hex digits>-001, -002, ...: the digits are the end of the sweep's Temporal run id.",
		"dqnflow sweep start --grid optim.lr=1e-4,3e-4,1e-3 --grid seed=1,2 --max-concurrent 4 --wait")
	fs := cmd.Flags()
	e.conn.register(fs)
	cfgPath := fs.String("config", "", "base RunConfig JSON (default: built-in defaults)")
	grid := gridFlag{}
	fs.Var(grid, "grid", "a config key and its values, PATH=V1,V2,... (repeatable)")
	maxConc := fs.Int("max-concurrent", 2, fmt.Sprintf("runs in flight at once (1 to %d)", workflows.MaxSweepConcurrent))
	id := fs.String("id", "", "sweep id (default: sweep-<time>-<random>)")
	wait := fs.Bool("wait", false, "block until the sweep ends and print the best run")
	jsonOut := fs.Bool("json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		if len(grid) == 0 {
			return fmt.Errorf("%w: give at least one --grid PATH=V1,V2", errUsage)
		}
		if *maxConc < 1 || *maxConc > workflows.MaxSweepConcurrent {
			return fmt.Errorf("%w: flag --max-concurrent %d: must be from 1 to %d", errUsage, *maxConc, workflows.MaxSweepConcurrent)
		}
		base, err := config.Load(*cfgPath)
		if err != nil {
			return err
		}
		if *id == "" {
			*id = newRunID("sweep")
		}
		c, err := dial(ctx, e)
		if err != nil {
			return err
		}
		defer c.Close()
		run, err := startWorkflow(ctx, c, *id, workflows.SweepName, workflows.SweepInput{Base: base, Grid: grid, MaxConcurrent: *maxConc})
		if err != nil {
			return err
		}
		if !*wait {
			if *jsonOut {
				return jsonfile.Print(e.stdout, map[string]string{"sweep_id": *id})
			}
			fmt.Fprintln(e.stdout, *id)
			return nil
		}
		var res workflows.SweepResult
		if err := run.Get(ctx, &res); err != nil {
			return fmt.Errorf("sweep %s failed: %w", *id, err)
		}
		if *jsonOut {
			return jsonfile.Print(e.stdout, res)
		}
		fmt.Fprintf(e.stdout, "sweep %s: %d runs, best %s with validation Sharpe %.3f\n", *id, len(res.Points), res.BestRunID, res.BestValidSharpe)
		return nil
	}
	return cmd
}
