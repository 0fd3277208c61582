package cli

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"
	"go.temporal.io/api/enums/v1"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/data"
	"github.com/dqnflow/dqnflow/internal/jsonfile"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/research/wfrun"
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
			"\"dqnflow report --walkforward ID\" draws the study once it has ended. "+
			"The id of a study that has ended (completed, failed, canceled or terminated) resumes it: the windows it recorded in the store are kept, the others train; "+
			"it is refused while that study runs, or when its settings differ from these (--fresh trains every window again under the id).",
		"dqnflow walkforward start --series '../shared/data/corpus/h4-forex/*.csv' --device cuda --id wf-h4-forex",
		"dqnflow walkforward start --config panel.json --leave-out 25% --max-concurrent 4",
		"dqnflow walkforward start --series '../shared/data/corpus/h4-forex/*.csv' --device cuda --id wf-h4-forex   # again: resumes it")
	fs := cmd.Flags()
	e.conn.register(fs)
	sf := addStudyFlags(fs)
	id := fs.String("id", "", "the workflow id and the study's id in the store (default: walkforward-<time>-<random>)")
	concurrent := fs.Int("max-concurrent", 1, fmt.Sprintf("windows that train at once, each on a GPU slot of its own, at most %d", workflows.MaxSweepConcurrent))
	fresh := fs.Bool("fresh", false, "with the --id of a study that has ended: train every window again, replacing its rows, instead of resuming it")
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
			if data.IsBundled(s.Path) || s.Path == prices.SyntheticPath {
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
			Layout: st.Layout, Seeds: st.Seeds, LeaveOut: st.LeaveOut, Gate: st.Gate, Panel: st.Panel, PriorTrials: st.PriorTrials},
			MaxConcurrent: *concurrent, Fresh: *fresh}
		c, err := dial(ctx, e)
		if err != nil {
			return err
		}
		defer c.Close()
		again, err := wfrun.CheckResume(ctx, c, *id, in, *fresh)
		if err != nil {
			return err
		}
		policy := enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE
		if again {
			policy = enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE
		}
		if _, err := startWorkflowReusing(ctx, c, *id, workflows.WalkForwardName, in, policy); err != nil {
			return err
		}
		if again && *fresh {
			fmt.Fprintf(e.stderr, "walk-forward study %s starts again: every window trains, replacing its rows (--fresh)\n", *id)
		} else if again {
			fmt.Fprintf(e.stderr, "walk-forward study %s resumes: the windows its earlier execution recorded are kept, the others train (--fresh trains every one again)\n", *id)
		}
		if *jsonOut {
			return jsonfile.Print(e.stdout, map[string]any{"study_id": *id, "workflow_id": *id, "resumed": again && !*fresh})
		}
		fmt.Fprintln(e.stdout, *id)
		return nil
	}
	return cmd
}
