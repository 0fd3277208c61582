package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
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
// the same (StudyDiff finds nothing), the windows it recorded, which the
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
	want, err := WalkForwardRecord(in.StudyID, head)
	if err != nil {
		return WalkForwardResumeOutput{}, nonRetryable(ErrTypeStoreRejected, what, err, "")
	}
	if d := StudyDiff(stored, want); len(d) > 0 {
		return WalkForwardResumeOutput{}, nonRetryable(ErrTypeInvalidConfig, what,
			fmt.Errorf("the study stored under this id has another %s", strings.Join(d, ", ")),
			"start the study under another id, or again with --fresh to train every window again under this one")
	}
	prev, err := StudyOutput(stored)
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

// StudyDiff names the fields in which studies a and b, as
// WalkForwardRecord gives them, differ as studies: config, series,
// layout, seeds, leave_out, gate, panel and prior_trials (JSON compared
// as values, a missing list as an empty one). Their results, windows,
// timings and notes are not compared: they are what a study produces.
func StudyDiff(a, b metadata.WalkForwardStudy) []string {
	var d []string
	for _, f := range []struct {
		name string
		a, b json.RawMessage
	}{{"config", a.Config, b.Config}, {"series", a.Series, b.Series}, {"layout", a.Layout, b.Layout}} {
		if !sameJSON(f.a, f.b) {
			d = append(d, f.name)
		}
	}
	if !slices.Equal(a.Seeds, b.Seeds) {
		d = append(d, "seeds")
	}
	if !slices.Equal(a.LeaveOut, b.LeaveOut) {
		d = append(d, "leave_out")
	}
	if a.Gate != b.Gate {
		d = append(d, "gate")
	}
	if a.Panel != b.Panel {
		d = append(d, "panel")
	}
	if a.TrialsPrior != b.TrialsPrior {
		d = append(d, "prior_trials")
	}
	return d
}

// sameJSON reports whether a and b encode the same value.
func sameJSON(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

// StudyOutput is the study that the store's rows rec hold, the inverse
// of WalkForwardRecord: empty lists read as none (nil), as a
// results.json's do, and windows that WalkForwardRecord made up from the
// results (no dates) are left out.
func StudyOutput(rec metadata.WalkForwardStudy) (walkforward.Output, error) {
	out := walkforward.Output{Gate: rec.Gate, Panel: rec.Panel, Device: rec.Device, Seconds: rec.Seconds, Stopped: rec.Stopped,
		Trials: walkforward.Trials{Study: rec.TrialsStudy, Prior: rec.TrialsPrior, Total: rec.TrialsTotal}}
	if len(rec.Seeds) > 0 {
		out.Seeds = rec.Seeds
	}
	if len(rec.LeaveOut) > 0 {
		out.LeaveOut = rec.LeaveOut
	}
	if len(rec.Notes) > 0 {
		out.Notes = rec.Notes
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		dst  any
	}{{"config", rec.Config, &out.Config}, {"series", rec.Series, &out.Series}, {"layout", rec.Layout, &out.Layout},
		{"plan", rec.Plan, &out.Plan}, {"timings", rec.Timings, &out.Timings}} {
		if len(f.raw) == 0 || string(f.raw) == "[]" {
			continue
		}
		if err := json.Unmarshal(f.raw, f.dst); err != nil {
			return out, fmt.Errorf("walk-forward study %s: its stored %s: %w", rec.ID, f.name, err)
		}
	}
	for _, w := range rec.Windows {
		if w.TrainFrom.IsZero() && w.TestTo.IsZero() {
			continue // a window WalkForwardRecord made up from the results
		}
		out.Windows = append(out.Windows, walkforward.Window{Index: w.Index, TrainFrom: w.TrainFrom, ValidFrom: w.ValidFrom,
			TestFrom: w.TestFrom, TestTo: w.TestTo})
	}
	for _, r := range rec.Results {
		out.Results = append(out.Results, walkforward.Result{Window: r.Window, Series: r.Series, Strategy: r.Strategy, Seed: r.Seed,
			Detail: r.Detail, Note: r.Note, InTraining: r.InTraining, ValidSharpe: r.ValidSharpe, ValidT: r.ValidT, Bars: r.Bars,
			Sharpe: r.Sharpe, SharpeLo: r.SharpeLo, SharpeHi: r.SharpeHi, SharpeT: r.SharpeT, BarSharpe: r.BarSharpe,
			DaysPerYear: r.DaysPerYear, TotalReturn: r.TotalReturn, MaxDrawdown: r.MaxDrawdown, Turnover: r.Turnover, Costs: r.Costs,
			Days: r.Days, Returns: r.Returns})
	}
	return out, nil
}
