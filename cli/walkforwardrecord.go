package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/store"
	"github.com/dqnflow/dqnflow/walkforward"
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
	maxBytes := fs.Int64("max-bytes", defaultMaxResultsBytes, "largest results.json read, in bytes")
	cmd.Args = argsBetween(1, 1)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		path := resultsPath(args[0])
		res, err := readStudyJSON(path, *maxBytes)
		if err != nil {
			return err
		}
		studyID := *id
		if studyID == "" {
			studyID = defaultStudyID(path)
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
		if err := recordStudy(ctx, st, rec); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "recorded walk-forward study %s: %d windows, %d results (dqnflow report --walkforward %s --out DIR draws it)\n",
			studyID, len(rec.Windows), len(rec.Results), studyID)
		return nil
	}
	return cmd
}

// resultsPath is arg, or arg/results.json when arg is a directory.
func resultsPath(arg string) string {
	if fi, err := os.Stat(arg); err == nil && fi.IsDir() {
		return filepath.Join(arg, "results.json")
	}
	return arg
}

// defaultStudyID is the name of the directory that holds results.json
// (runs/<id> is `dqnflow walkforward`'s default --out).
func defaultStudyID(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return filepath.Base(filepath.Dir(path))
	}
	return filepath.Base(filepath.Dir(abs))
}

// recordStudy writes rec to st, which must keep walk-forward studies.
func recordStudy(ctx context.Context, st store.Metadata, rec metadata.WalkForwardStudy) error {
	wf, ok := st.(store.WalkForwardStore)
	if !ok {
		return fmt.Errorf("record walk-forward %s: the metadata store %T keeps no walk-forward studies", rec.ID, st)
	}
	return wf.RecordWalkForward(ctx, rec)
}

// studyOutput is the study that the store's rows rec hold, as
// readStudyJSON would read its results.json (walkforward.StudyOutput); a
// study without results is an error.
func studyOutput(rec metadata.WalkForwardStudy) (walkforward.Output, error) {
	out, err := walkforward.StudyOutput(rec)
	if err != nil {
		return out, err
	}
	if len(out.Results) == 0 {
		return out, fmt.Errorf("walk-forward study %s: no results stored", rec.ID)
	}
	return out, nil
}
