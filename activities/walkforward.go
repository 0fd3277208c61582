package activities

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/files"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/walkforward"
)

// WalkForwardSpec is a walk-forward study as the WalkForward workflow
// runs it: walkforward.Study's fields that JSON can carry. StudyID names
// the study in the store (walkforward_studies.id).
type WalkForwardSpec struct {
	StudyID     string              `json:"study_id"`
	Config      config.RunConfig    `json:"config"`
	Series      []prices.SeriesSpec `json:"series"`
	Layout      walkforward.Layout  `json:"layout"`
	Seeds       []uint64            `json:"seeds"`
	LeaveOut    []string            `json:"leave_out,omitempty"`
	Gate        string              `json:"gate,omitempty"`
	Panel       bool                `json:"panel,omitempty"`
	PriorTrials int                 `json:"prior_trials,omitempty"`
}

// study is the walkforward.Study of spec on this worker: its series read
// through the worker's data roots, its runs trained by tr.
func (s WalkForwardSpec) study(src prices.Source, tr walkforward.Trainer) *walkforward.Study {
	return &walkforward.Study{Config: s.Config, Series: s.Series, Source: src, Layout: s.Layout, Seeds: s.Seeds,
		LeaveOut: s.LeaveOut, Gate: s.Gate, Panel: s.Panel, PriorTrials: s.PriorTrials, Train: tr}
}

// checkSeries checks every series' file against the worker's data roots
// before anything is read: a path outside them is an invalid config.
func (a *Trainer) checkSeries(what string, s WalkForwardSpec) error {
	if err := s.Config.Validate(); err != nil {
		return classify(what, err)
	}
	if s.StudyID == "" {
		return temporal.NewNonRetryableApplicationError(what+": empty study id", ErrTypeInvalidConfig, nil)
	}
	for _, sp := range s.Series {
		if err := a.Data.Check(market.SeriesConfig(s.Config, sp)); err != nil {
			if errors.Is(err, files.ErrOutsideRoot) {
				return nonRetryable(ErrTypeInvalidConfig, what+": series "+sp.Name, err,
					"every series must be a file inside the workers' data roots (dqnflow worker --data-root); start the study again with them")
			}
			return nonRetryable(ErrTypeBadData, what+": series "+sp.Name, err, "fix the series' path or file, then start the study again")
		}
	}
	return nil
}

// WalkForwardPlanOutput is a study's calendar.
type WalkForwardPlanOutput struct {
	Plan walkforward.Plan `json:"plan"`
}

// WalkForwardPlan lays the windows of study in over its series' bars,
// read through this worker's data roots, and trains nothing: the
// WalkForward workflow runs a child a window. It runs on the GPU task
// queue outside a session (the GPU workers are the ones that read the
// data), and is read-only, so it may be retried anywhere.
func (a *Trainer) WalkForwardPlan(ctx context.Context, in WalkForwardSpec) (WalkForwardPlanOutput, error) {
	what := "walk-forward " + in.StudyID + ": plan"
	if err := a.checkSeries(what, in); err != nil {
		return WalkForwardPlanOutput{}, err
	}
	refuse := func(context.Context, walkforward.TrainRequest) (walkforward.Agent, error) {
		return walkforward.Agent{}, errors.New("a plan trains nothing")
	}
	p, err := in.study(a.Data, refuse).Lay(ctx)
	if err != nil {
		return WalkForwardPlanOutput{}, classify(what, err)
	}
	return WalkForwardPlanOutput{Plan: p}, nil
}

// WalkForwardWindowInput asks for window Index of study Spec.
type WalkForwardWindowInput struct {
	Spec  WalkForwardSpec `json:"spec"`
	Index int             `json:"index"`
}

// WalkForwardWindowOutput is one window's Output, as the workflow keeps
// it: its results without their daily returns (Days, Returns), which
// the store holds (a window's returns can pass Temporal's 2 MB payload
// limit); Recorded is how many results were written.
type WalkForwardWindowOutput struct {
	Output   walkforward.Output `json:"output"`
	Recorded int                `json:"recorded"`
}

// WalkForwardHeartbeat is the WalkForwardWindow activity's liveness
// heartbeat: the window and how long it has run.
type WalkForwardHeartbeat struct {
	Window  int     `json:"window"`
	Seconds float64 `json:"seconds"`
	Runs    int64   `json:"runs"` // agent runs trained so far
}

// WalkForwardWindow runs window in.Index of the study (its baselines and
// its agent runs, walkforward.Study.RunWindow) on this worker's device,
// its series read through the worker's data roots, and records the
// window and its results in the store (RecordWalkForwardWindow), whose
// header the workflow wrote first. It heartbeats every
// HeartbeatInterval while it works.
//
// Retry: a retried window trains again from the start (the CPU backend
// gives the same results, a GPU ones of the same distribution) and
// replaces the window's rows, so the store holds one copy.
func (a *Trainer) WalkForwardWindow(ctx context.Context, in WalkForwardWindowInput) (WalkForwardWindowOutput, error) {
	what := fmt.Sprintf("walk-forward %s window %d", in.Spec.StudyID, in.Index)
	if err := a.checkSeries(what, in.Spec); err != nil {
		return WalkForwardWindowOutput{}, err
	}
	wfs, ok := a.Store.(WalkForwardStore)
	if !ok {
		return WalkForwardWindowOutput{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s: the metadata store %T keeps no walk-forward studies; run the GPU workers with a PostgreSQL DATABASE_URL", what, a.Store),
			ErrTypeStoreRejected, nil)
	}
	dev, err := a.device(ctx)
	if err != nil {
		return WalkForwardWindowOutput{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s: %v; the window opens its session again", what, err), ErrTypeTrainerLost, err)
	}
	start := time.Now()
	var runs atomic.Int64
	stop := a.heartbeat(ctx, func() any {
		return WalkForwardHeartbeat{Window: in.Index, Seconds: time.Since(start).Seconds(), Runs: runs.Load()}
	})
	defer stop()
	local := walkforward.LocalTrainer(dev.Backend, checkpoint.Options{}, nil)
	train := func(ctx context.Context, req walkforward.TrainRequest) (walkforward.Agent, error) {
		req.Config = dev.config(req.Config)
		ag, err := local(ctx, req)
		runs.Add(1)
		return ag, err
	}
	spec := in.Spec
	st := spec.study(a.Data, train)
	st.Log = activityLog{ctx}
	out, err := st.RunWindow(ctx, in.Index)
	if err != nil {
		return WalkForwardWindowOutput{}, classify(what, err)
	}
	out.Device = dev.Name
	rec, err := walkforward.StudyRecord(spec.StudyID, out)
	if err != nil {
		return WalkForwardWindowOutput{}, nonRetryable(ErrTypeStoreRejected, what, err, "")
	}
	if len(rec.Windows) != 1 {
		return WalkForwardWindowOutput{}, fmt.Errorf("%s: %d windows in its output, want 1", what, len(rec.Windows))
	}
	if err := wfs.RecordWalkForwardWindow(ctx, spec.StudyID, rec.Windows[0], rec.Results); err != nil {
		return WalkForwardWindowOutput{}, classify(what+": record", err)
	}
	for i := range out.Results {
		out.Results[i].Days, out.Results[i].Returns = nil, nil
	}
	return WalkForwardWindowOutput{Output: out, Recorded: len(rec.Results)}, nil
}

// activityLog writes the study's log lines to the activity's logger.
type activityLog struct{ ctx context.Context }

func (l activityLog) Write(p []byte) (int, error) {
	activity.GetLogger(l.ctx).Info(string(p))
	return len(p), nil
}

// WalkForwardHeaderInput is a study's header to record: Output's fields
// other than Results (which the windows record).
type WalkForwardHeaderInput struct {
	StudyID string             `json:"study_id"`
	Output  walkforward.Output `json:"output"`
}

// RecordWalkForwardHeader writes a study's header row and its windows'
// list (store.RecordWalkForwardHeader): before the first window, so that
// the windows have their study, and at the end with the study's timings,
// notes and seconds. Idempotent: it writes the same row again.
func (c *Control) RecordWalkForwardHeader(ctx context.Context, in WalkForwardHeaderInput) error {
	what := "walk-forward " + in.StudyID + ": record header"
	wfs, ok := c.Store.(WalkForwardStore)
	if !ok {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s: the metadata store %T keeps no walk-forward studies; run the control workers with a PostgreSQL DATABASE_URL", what, c.Store),
			ErrTypeStoreRejected, nil)
	}
	head := in.Output
	head.Results = nil
	rec, err := walkforward.StudyRecord(in.StudyID, head)
	if err != nil {
		return nonRetryable(ErrTypeStoreRejected, what, err, "")
	}
	return classify(what, wfs.RecordWalkForwardHeader(ctx, rec))
}
