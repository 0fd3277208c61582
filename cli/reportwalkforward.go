package cli

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/report"
	"github.com/dqnflow/dqnflow/research/wfrun"
	"github.com/dqnflow/dqnflow/store"
	"github.com/dqnflow/dqnflow/walkforward"
)

// reportWalkForward is "dqnflow report --walkforward DIR_OR_STUDY_ID --out
// DIR": the study is read from its results.json when the argument is a
// directory or file that exists, else from the metadata store under that
// id; it is summarised as "walkforward summarize" does and drawn by
// report.WriteWalkForward.
func reportWalkForward(ctx context.Context, e *env, cmd *cobra.Command, arg, out string, pos []string) error {
	switch {
	case arg == "":
		return fmt.Errorf("%w: want %q, or --walkforward DIR_OR_STUDY_ID", errUsage, cmd.UseLine())
	case len(pos) > 0:
		return fmt.Errorf("%w: --walkforward %s and the id %s: give one of them", errUsage, arg, pos[0])
	}
	if err := required(cmd.Flags(), "out"); err != nil {
		return err
	}
	id, from, study, err := loadWalkForward(ctx, e, arg)
	if err != nil {
		return err
	}
	sum, err := wfrun.Summarize(study)
	if err != nil {
		return fmt.Errorf("report of walk-forward %s: %w", id, err)
	}
	path, err := report.WriteWalkForward(out, report.WalkForward{ID: id, From: from, Study: study, Summary: sum})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "wrote %s (walk-forward %s, %d results)\n", path, id, len(study.Results))
	return nil
}

// loadWalkForward reads the study arg names: a directory or results.json
// that exists (its id the directory's name), else the metadata store's
// study of that id. from says which, for the page.
func loadWalkForward(ctx context.Context, e *env, arg string) (id, from string, study walkforward.Output, err error) {
	if _, serr := os.Stat(arg); serr == nil {
		path := wfrun.ResultsPath(arg)
		study, err = wfrun.Read(path, wfrun.DefaultMaxBytes)
		return wfrun.DefaultStudyID(path), path, study, err
	}
	st, err := openReader(ctx, e)
	if err != nil {
		return arg, "", study, fmt.Errorf("walk-forward %s: no such file or directory, and the metadata store: %w", arg, err)
	}
	defer st.Close()
	wf, ok := st.(store.WalkForwardStore)
	if !ok {
		return arg, "", study, fmt.Errorf("walk-forward %s: no such file or directory, and the metadata store %T keeps no studies", arg, st)
	}
	rec, err := wf.GetWalkForward(ctx, arg)
	if errors.Is(err, metadata.ErrNotFound) {
		return arg, "", study, fmt.Errorf("walk-forward %s: no such file or directory, and %w (\"dqnflow walkforward record DIR\" stores one)", arg, err)
	}
	if err != nil {
		return arg, "", study, err
	}
	study, err = wfrun.StudyOutput(rec)
	return arg, "the metadata store (recorded " + rec.CreatedAt.UTC().Format("2006-01-02 15:04 MST") + ")", study, err
}
