package cli

import (
	"fmt"

	"github.com/dqnflow/dqnflow/research/wfrun"
	"github.com/dqnflow/dqnflow/walkforward"
	"github.com/spf13/cobra"
)

// walkForwardRecordCmd is "dqnflow walkforward record DIR_OR_FILE [--id
// ID]": a results.json written to the metadata store's walk-forward
// tables, for "dqnflow report --walkforward ID" on any host that sees the
// store.
func walkForwardRecordCmd(e *env) *cobra.Command {
	cmd := leaf("record DIR_OR_FILE",
		"write a walk-forward's results.json to the metadata store",
		"record reads a walk-forward's results.json (DIR/results.json, or the file named) and writes the whole study to the metadata store "+
			"(PostgreSQL: the SQLite store of \"dqnflow dev\" keeps no studies) in one transaction: its config, series, layout and seeds, "+
			"every window, and every result with its daily returns. The study's id is --id, or the name of the directory results.json is in; "+
			"recording an id again replaces that study. \"dqnflow report --walkforward ID\" draws it.",
		"dqnflow walkforward record runs/wf",
		"dqnflow walkforward record runs/wf/results.json --id wf-h4-forex-2026-12")
	fs := cmd.Flags()
	id := fs.String("id", "", "the study's id in the store (default: the name of the directory results.json is in)")
	maxBytes := fs.Int64("max-bytes", wfrun.DefaultMaxBytes, "largest results.json read, in bytes")
	cmd.Args = argsBetween(1, 1)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		path := wfrun.ResultsPath(args[0])
		res, err := wfrun.Read(path, *maxBytes)
		if err != nil {
			return err
		}
		studyID := *id
		if studyID == "" {
			studyID = wfrun.DefaultStudyID(path)
		}
		rec, err := walkforward.StudyRecord(studyID, res)
		if err != nil {
			return fmt.Errorf("record %s: %w", path, err)
		}
		st, err := openStore(ctx, e, false)
		if err != nil {
			return err
		}
		defer st.Close()
		if err := wfrun.Record(ctx, st, rec); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "recorded walk-forward study %s: %d windows, %d results (dqnflow report --walkforward %s --out DIR draws it)\n",
			studyID, len(rec.Windows), len(rec.Results), studyID)
		return nil
	}
	return cmd
}
