package wfrun

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/store"
	"github.com/dqnflow/dqnflow/walkforward"
)

// ResultsPath is arg, or arg/results.json when arg is a directory.
func ResultsPath(arg string) string {
	if fi, err := os.Stat(arg); err == nil && fi.IsDir() {
		return filepath.Join(arg, "results.json")
	}
	return arg
}

// DefaultStudyID is the name of the directory that holds results.json
// (runs/<id> is `dqnflow walkforward`'s default --out).
func DefaultStudyID(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return filepath.Base(filepath.Dir(path))
	}
	return filepath.Base(filepath.Dir(abs))
}

// Record writes rec to st, which must keep walk-forward studies.
func Record(ctx context.Context, st store.Metadata, rec metadata.WalkForwardStudy) error {
	wf, ok := st.(store.WalkForwardStore)
	if !ok {
		return fmt.Errorf("record walk-forward %s: the metadata store %T keeps no walk-forward studies", rec.ID, st)
	}
	return wf.RecordWalkForward(ctx, rec)
}

// StudyOutput is the study that the store's rows rec hold, as
// Read would read its results.json (walkforward.StudyOutput); a
// study without results is an error.
func StudyOutput(rec metadata.WalkForwardStudy) (walkforward.Output, error) {
	out, err := walkforward.StudyOutput(rec)
	if err != nil {
		return out, err
	}
	if len(out.Results) == 0 {
		return out, fmt.Errorf("walk-forward study %s: no results stored", rec.ID)
	}
	return out, nil
}
