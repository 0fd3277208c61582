package cli

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/data"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/workflows"
)

// walkForwardStartCmd is "dqnflow walkforward start": the study of
// "dqnflow walkforward"'s flags started as a WalkForward workflow on
// Temporal, a child workflow a window on the GPU workers, its results
// recorded in the metadata store under the study's id.
func walkForwardStartCmd(e *env) *cobra.Command {
	cmd := leaf("start",
		"start a walk-forward study on Temporal; prints its id",
		"start starts a WalkForward workflow with the study the flags describe (the same as \"dqnflow walkforward\"'s) and prints its id, which is also the study's id in the metadata store. "+
			"A GPU worker lays the windows; each window then runs as a child workflow (id ID-window-NNN) on a GPU worker, which reads the series through its own data roots (--data-root of the worker), "+
			"trains the window's runs and records the window and its results in the store. A lost worker costs only the window it was running, which starts over on another. "+
			"The series' globs are expanded here, and their paths made absolute: the workers must see the files at the same paths. "+
			"\"dqnflow report --walkforward ID\" draws the study once it has ended.",
		"dqnflow walkforward start --series '../shared/data/corpus/h4-forex/*.csv' --device cuda --id wf-h4-forex",
		"dqnflow walkforward start --config panel.json --leave-out 25% --max-concurrent 4")
	fs := cmd.Flags()
	e.conn.register(fs)
	sf := addStudyFlags(fs)
	id := fs.String("id", "", "the workflow id and the study's id in the store (default: walkforward-<time>-<random>)")
	concurrent := fs.Int("max-concurrent", 1, fmt.Sprintf("windows that train at once, each on a GPU slot of its own, at most %d", workflows.MaxSweepConcurrent))
	jsonOut := fs.Bool("json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		st, _, err := sf.study()
		if err != nil {
			return err
		}
		if *concurrent < 1 || *concurrent > workflows.MaxSweepConcurrent {
			return fmt.Errorf("%w: --max-concurrent %d: want 1 to %d", errUsage, *concurrent, workflows.MaxSweepConcurrent)
		}
		for i, s := range st.Series {
			if data.IsBundled(s.Path) || s.Path == market.SyntheticPath {
				continue
			}
			if st.Series[i].Path, err = filepath.Abs(s.Path); err != nil {
				return fmt.Errorf("series %s: %w", s.Name, err)
			}
		}
		if *id == "" {
			*id = newRunID("walkforward")
		}
		in := workflows.WalkForwardInput{WalkForwardSpec: activities.WalkForwardSpec{StudyID: *id, Config: st.Config, Series: st.Series,
			Layout: st.Layout, Seeds: st.Seeds, LeaveOut: st.LeaveOut, Gate: st.Gate, Panel: st.Panel, PriorTrials: st.PriorTrials}, MaxConcurrent: *concurrent}
		c, err := dial(ctx, e)
		if err != nil {
			return err
		}
		defer c.Close()
		if _, err := startWorkflow(ctx, c, *id, workflows.WalkForwardName, in); err != nil {
			return err
		}
		if *jsonOut {
			return printJSON(e, map[string]string{"study_id": *id, "workflow_id": *id})
		}
		fmt.Fprintln(e.stdout, *id)
		return nil
	}
	return cmd
}
