package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/walkforward"
)

// WalkForwardResumeInput is a study about to be recorded under StudyID:
// the header the WalkForward workflow writes before its first window
// (the study's config, series, layout, seeds and so on, and its plan's
// windows).
type WalkForwardResumeInput struct {
	StudyID string             `json:"study_id"`
	Header  walkforward.Output `json:"header"`
}

// WalkForwardResumeOutput is what the store already holds of the study:
// the output of each window of the header that an earlier execution
// under the same id recorded with its results, in window order, its
// results without their daily returns (as WalkForwardWindow returns
// them).
type WalkForwardResumeOutput struct {
	Windows []WalkForwardWindowOutput `json:"windows,omitempty"`
}

// WalkForwardResume reads what the store holds of study in.StudyID
// before the WalkForward workflow writes its header (ADR 0041,
// addendum): nothing for a new id; for a used one whose stored study is
// the same (walkforward.StudyDiff finds nothing), the windows it recorded, which the
// workflow does not train again. A stored window counts when its index
// and dates are the header's and it has results: the header write
// inserts every window without results, and RecordWalkForwardWindow
// writes a window with its results in one transaction (every window has
// results: its baselines at least). A stored study that differs is
// refused, non-retryably, naming what differs. Read-only, so a retry
// changes nothing.
func (c *Control) WalkForwardResume(ctx context.Context, in WalkForwardResumeInput) (WalkForwardResumeOutput, error) {
	what := "walk-forward " + in.StudyID + ": resume"
	wfs, ok := c.Store.(WalkForwardStore)
	if !ok {
		return WalkForwardResumeOutput{}, nonRetryable(ErrTypeStoreRejected, what,
			fmt.Errorf("the metadata store %T keeps no walk-forward studies", c.Store), "run the control workers with a PostgreSQL DATABASE_URL")
	}
	stored, err := wfs.GetWalkForward(ctx, in.StudyID)
	if errors.Is(err, metadata.ErrNotFound) {
		return WalkForwardResumeOutput{}, nil
	}
	if err != nil {
		return WalkForwardResumeOutput{}, classify(what, err)
	}
	head := in.Header
	head.Results = nil
	want, err := walkforward.StudyRecord(in.StudyID, head)
	if err != nil {
		return WalkForwardResumeOutput{}, nonRetryable(ErrTypeStoreRejected, what, err, "")
	}
	if d := walkforward.StudyDiff(stored, want); len(d) > 0 {
		return WalkForwardResumeOutput{}, nonRetryable(ErrTypeInvalidConfig, what,
			fmt.Errorf("the study stored under this id has another %s", strings.Join(d, ", ")),
			"start the study under another id, or again with --fresh to train every window again under this one")
	}
	prev, err := walkforward.StudyOutput(stored)
	if err != nil {
		return WalkForwardResumeOutput{}, nonRetryable(ErrTypeStoreRejected, what, err, "")
	}
	var out WalkForwardResumeOutput
	for _, w := range in.Header.Windows {
		if !slices.ContainsFunc(prev.Windows, func(s walkforward.Window) bool { return sameWindow(s, w) }) {
			continue
		}
		wo := walkforward.Output{Windows: []walkforward.Window{w}, Device: prev.Device}
		for _, r := range prev.Results {
			if r.Window == w.Index {
				r.Days, r.Returns = nil, nil
				wo.Results = append(wo.Results, r)
			}
		}
		if len(wo.Results) == 0 {
			continue // laid, not recorded
		}
		for _, tm := range prev.Timings {
			if tm.Window == w.Index {
				wo.Timings = append(wo.Timings, tm)
			}
		}
		out.Windows = append(out.Windows, WalkForwardWindowOutput{Output: wo, Recorded: len(wo.Results)})
	}
	return out, nil
}

// sameWindow reports whether a and b are the same window: index and
// dates.
func sameWindow(a, b walkforward.Window) bool {
	return a.Index == b.Index && a.TrainFrom.Equal(b.TrainFrom) && a.ValidFrom.Equal(b.ValidFrom) &&
		a.TestFrom.Equal(b.TestFrom) && a.TestTo.Equal(b.TestTo)
}
