package workflows

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/errtext"
	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/walkforward"
)

// Workflow type names of the walk-forward study.
const (
	WalkForwardName       = "WalkForward"
	WalkForwardWindowName = "WalkForwardWindow"
)

// ErrTypeWindowFailed is the application error type of a study that
// stopped at a window that failed; the window's error is its cause.
const ErrTypeWindowFailed = "WalkForwardWindowFailed"

// WalkForwardProgressQuery is the name of WalkForward's query handler; it
// returns a WalkForwardProgress.
const WalkForwardProgressQuery = "progress"

// MaxWalkForwardResults bounds the results WalkForward returns in its
// result: beyond it the result lists none and says so (every result is
// in the store), since a workflow's result is one payload of at most
// 2 MB and a result without its daily returns takes about 500 bytes.
const MaxWalkForwardResults = 2000

// WalkForwardInput is the input of WalkForward: the study (its id, the
// agent's config, the series, the layout, the seeds, the series left
// out, the gate, panel training and the configurations tried before) and
// how many windows may train at once (0 means 1; at most
// MaxSweepConcurrent, for the reason given there). A StudyID left out is
// the workflow id; a zero Config is the defaults, zero layout periods
// walkforward.DefaultLayout's, no seeds the config's seed alone.
//
// A study id that the store holds already resumes that study: the
// windows it recorded are not trained again (ADR 0041, addendum); Fresh
// trains every window again and replaces their rows.
type WalkForwardInput struct {
	activities.WalkForwardSpec
	MaxConcurrent int  `json:"max_concurrent,omitempty"`
	Fresh         bool `json:"fresh,omitempty"`
}

// WalkForwardProgress is what the progress query returns, and the memo
// the UI shows beside the search attributes.
type WalkForwardProgress struct {
	StudyID string `json:"study_id"`
	Status  string `json:"status"`
	Windows int    `json:"windows"`
	Done    int    `json:"windows_done"`
	Running []int  `json:"windows_running,omitempty"`
	Error   string `json:"error,omitempty"`
}

// WalkForwardResult is WalkForward's result: the study's Output, its
// windows merged in window order, each result without its daily returns
// (the store holds them: `dqnflow report --walkforward STUDY_ID`), or
// with no results at all beyond MaxWalkForwardResults (ResultsInStore).
type WalkForwardResult struct {
	StudyID        string             `json:"study_id"`
	Output         walkforward.Output `json:"output"`
	Recorded       int                `json:"recorded"`
	ResultsInStore bool               `json:"results_in_store,omitempty"`
	// Resumed lists the windows an earlier execution under the study's
	// id had recorded, which this one took from the store untrained.
	Resumed []int `json:"resumed,omitempty"`
}

// WalkForward runs a calendar walk-forward study (package walkforward)
// as a child WalkForwardWindow workflow per window, at most
// MaxConcurrent at once. A GPU worker first lays the windows over the
// series' bars (activities.Trainer.WalkForwardPlan), the study's header
// and windows are recorded in the store, then each child trains and
// records its window; at the end the header is recorded again with the
// study's timings, notes and wall time.
//
// Resumable: the children's results are in the history, so a workflow
// whose worker is lost replays them and runs only the windows that had
// not completed; a new execution under the id of a study the store
// holds (completed, failed, terminated) takes the windows it recorded
// from the store and trains the others, or fails at once when the
// stored study is another (activities.Control.WalkForwardResume; Fresh
// trains them all again); a window whose worker is lost or whose
// activity fails is retried by its child (WalkForwardWindow). A window that fails for
// good (an invalid config, a non-finite run) stops the study: the windows
// running finish, the header records which windows ran, and the study
// fails.
//
// The UI shows the study in the workflow list with DqnStatus (running,
// completed, failed) and DqnEpoch (the windows done), and its progress
// (windows, windows done, windows running) in the memo and the progress
// query.
func (w *Workflows) WalkForward(ctx workflow.Context, in WalkForwardInput) (*WalkForwardResult, error) {
	o := w.Options.WithDefaults()
	spec, err := walkForwardSpec(ctx, in)
	if err != nil {
		return nil, err
	}
	if in.MaxConcurrent < 0 || in.MaxConcurrent > MaxSweepConcurrent {
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("walk-forward input: max_concurrent %d outside [0, %d]; windows beyond the GPU slots only queue", in.MaxConcurrent, MaxSweepConcurrent),
			activities.ErrTypeInvalidConfig, nil)
	}
	start := workflow.Now(ctx)
	prog := &WalkForwardProgress{StudyID: spec.StudyID, Status: string(metadata.StatusRunning)}
	if err := workflow.SetQueryHandler(ctx, WalkForwardProgressQuery, func() (WalkForwardProgress, error) {
		p := *prog
		p.Running = slices.Clone(prog.Running)
		return p, nil
	}); err != nil {
		return nil, err
	}
	publish := func() {
		if err := workflow.UpsertTypedSearchAttributes(ctx, StatusKey.ValueSet(prog.Status), EpochKey.ValueSet(int64(prog.Done))); err != nil {
			workflow.GetLogger(ctx).Warn("Upserting search attributes failed", "error", err)
		}
		if err := workflow.UpsertMemo(ctx, map[string]any{"walkforward": *prog}); err != nil {
			workflow.GetLogger(ctx).Warn("Upserting the memo failed", "error", err)
		}
	}
	publish()

	var plan activities.WalkForwardPlanOutput
	if err := workflow.ExecuteActivity(o.planCtx(ctx), ta.WalkForwardPlan, spec).Get(ctx, &plan); err != nil {
		prog.Status, prog.Error = string(metadata.StatusFailed), errtext.Clean(err.Error())
		publish()
		return nil, err
	}
	ws := plan.Plan.Windows
	out := walkforward.Output{Config: spec.Config, Series: spec.Series, Layout: plan.Plan.Layout, Seeds: spec.Seeds, LeaveOut: spec.LeaveOut,
		Gate: spec.Gate, Panel: spec.Panel, Trials: walkforward.Trials{Study: 1, Prior: spec.PriorTrials, Total: 1 + spec.PriorTrials},
		Windows: ws, Plan: plan.Plan.Plan}
	if out.Gate == "" {
		out.Gate = walkforward.GateWindow
	}
	header := func(o2 walkforward.Output) error {
		o2.Results = nil
		return workflow.ExecuteActivity(o.controlCtx(ctx), ca.RecordWalkForwardHeader,
			activities.WalkForwardHeaderInput{StudyID: spec.StudyID, Output: o2}).Get(ctx, nil)
	}
	// The windows an earlier execution under this id recorded, read
	// before the header write replaces its header.
	outs := make([]*activities.WalkForwardWindowOutput, len(ws))
	var resumed []int
	if version(ctx, changeWalkForwardResume) != workflow.DefaultVersion && !in.Fresh {
		var prev activities.WalkForwardResumeOutput
		if err := workflow.ExecuteActivity(o.controlCtx(ctx), ca.WalkForwardResume,
			activities.WalkForwardResumeInput{StudyID: spec.StudyID, Header: out}).Get(ctx, &prev); err != nil {
			prog.Status, prog.Error = string(metadata.StatusFailed), errtext.Clean(err.Error())
			publish()
			return nil, err
		}
		for _, wo := range prev.Windows {
			if len(wo.Output.Windows) != 1 {
				continue // not a window's output: trained again
			}
			if i := wo.Output.Windows[0].Index; i >= 0 && i < len(outs) {
				outs[i] = &wo
				resumed = append(resumed, i)
			}
		}
	}
	if err := header(out); err != nil {
		prog.Status, prog.Error = string(metadata.StatusFailed), errtext.Clean(err.Error())
		publish()
		return nil, err
	}
	prog.Windows, prog.Done = len(ws), len(resumed)
	publish()

	// One child a window not resumed, at most limit at once; the windows
	// are merged in window order whatever order they end in.
	limit := max(in.MaxConcurrent, 1)
	sel := workflow.NewSelector(ctx)
	running, next := 0, 0
	skip := func() { // past the resumed windows
		for next < len(ws) && outs[next] != nil {
			next++
		}
	}
	skip()
	var failed error
	failedAt := -1
	for next < len(ws) && failed == nil || running > 0 {
		for failed == nil && running < limit && next < len(ws) {
			i := next
			next, running = next+1, running+1
			skip()
			prog.Running = append(prog.Running, i)
			id := spec.StudyID + fmt.Sprintf("-window-%03d", i)
			child := workflow.WithChildOptions(ctx, o.childOptions(id))
			f := workflow.ExecuteChildWorkflow(child, WalkForwardWindowName, activities.WalkForwardWindowInput{Spec: spec, Index: i})
			sel.AddFuture(f, func(f workflow.Future) {
				running--
				prog.Running = slices.DeleteFunc(prog.Running, func(k int) bool { return k == i })
				var wo activities.WalkForwardWindowOutput
				if err := f.Get(ctx, &wo); err != nil {
					if failed == nil || i < failedAt {
						failed, failedAt = err, i
					}
					return
				}
				outs[i] = &wo
				prog.Done++
			})
		}
		publish()
		sel.Select(ctx)
		if err := ctx.Err(); err != nil {
			for running > 0 {
				sel.Select(ctx)
			}
			prog.Status = string(metadata.StatusCanceled)
			publish()
			return nil, err
		}
	}
	publish()

	res := &WalkForwardResult{StudyID: spec.StudyID, Resumed: resumed}
	if len(resumed) > 0 {
		out.Notes = append(out.Notes, fmt.Sprintf("windows %v resumed: an earlier execution under this id recorded them, and they were not trained again", resumed))
	}
	done := 0 // the windows that ran, from the first on
	for done < len(ws) && outs[done] != nil {
		done++
	}
	out.Windows, out.Plan = ws[:done], plan.Plan.Plan[:done*len(spec.Series)]
	var devices []string
	for _, wo := range outs[:done] {
		out.Results = append(out.Results, wo.Output.Results...)
		out.Timings = append(out.Timings, wo.Output.Timings...)
		out.Notes = append(out.Notes, wo.Output.Notes...)
		res.Recorded += wo.Recorded
		if d := wo.Output.Device; d != "" && !slices.Contains(devices, d) {
			devices = append(devices, d)
		}
	}
	out.Device = strings.Join(devices, ", ")
	if failed != nil {
		out.Stopped = fmt.Sprintf("window %d failed after %d of %d windows (tests to %s); windows %d to %d did not complete",
			failedAt, done, len(ws), lastTestTo(ws[:done]), done, len(ws)-1)
		out.Notes = append(out.Notes, out.Stopped)
	}
	out.Seconds = workflow.Now(ctx).Sub(start).Seconds()
	if err := header(out); err != nil {
		prog.Status, prog.Error = string(metadata.StatusFailed), errtext.Clean(err.Error())
		publish()
		return nil, err
	}
	if failed != nil {
		prog.Status, prog.Error = string(metadata.StatusFailed), errtext.Clean(failed.Error())
		publish()
		return nil, temporal.NewApplicationErrorWithCause(fmt.Sprintf("walk-forward %s: window %d failed; the windows before it are recorded", spec.StudyID, failedAt),
			ErrTypeWindowFailed, failed)
	}
	if len(out.Results) > MaxWalkForwardResults {
		out.Results, res.ResultsInStore = nil, true
	}
	res.Output = out
	prog.Status = string(metadata.StatusCompleted)
	publish()
	return res, nil
}

// lastTestTo is the end of the last window's test block, or "" for none.
func lastTestTo(ws []walkforward.Window) string {
	if len(ws) == 0 {
		return "none"
	}
	return ws[len(ws)-1].TestTo.Format(time.DateOnly)
}

// walkForwardSpec is in's study with its defaults, checked: what no
// activity could fix fails the workflow at once, non-retryably.
func walkForwardSpec(ctx workflow.Context, in WalkForwardInput) (activities.WalkForwardSpec, error) {
	s := in.WalkForwardSpec
	if s.StudyID == "" {
		s.StudyID = workflow.GetInfo(ctx).WorkflowExecution.ID
	}
	if s.Config == (config.RunConfig{}) {
		s.Config = config.Defaults()
	}
	if err := s.Config.Validate(); err != nil {
		return s, invalidConfig("walk-forward config", err)
	}
	d := walkforward.DefaultLayout()
	for _, p := range []struct{ v, def *walkforward.Period }{{&s.Layout.Step, &d.Step}, {&s.Layout.Test, &d.Test}, {&s.Layout.Valid, &d.Valid}} {
		if *p.v == (walkforward.Period{}) {
			*p.v = *p.def
		}
	}
	if s.Layout.MinShare == 0 {
		s.Layout.MinShare = d.MinShare
	}
	if len(s.Seeds) == 0 {
		s.Seeds = []uint64{s.Config.Seed}
	}
	bad := func(msg string) error {
		return temporal.NewNonRetryableApplicationError("walk-forward input: "+msg+"; fix it and start again", activities.ErrTypeInvalidConfig, nil)
	}
	switch {
	case len(s.Series) == 0:
		return s, bad("no series")
	case s.Gate != "" && s.Gate != walkforward.GateWindow && s.Gate != walkforward.GateNone:
		return s, bad(fmt.Sprintf("gate %q: want %s or %s", s.Gate, walkforward.GateWindow, walkforward.GateNone))
	case s.PriorTrials < 0:
		return s, bad(fmt.Sprintf("prior_trials %d: must not be negative", s.PriorTrials))
	case len(s.LeaveOut) >= len(s.Series):
		return s, bad(fmt.Sprintf("every series (%d) is left out: the agent has nothing to train on", len(s.Series)))
	}
	return s, nil
}

// WalkForwardWindow runs window in.Index of a study: one
// WalkForwardWindow activity in a session on a GPU worker (its slot
// counts against the worker's, as a run's does), which trains the
// window's runs and records the window in the store. The activity is
// retried in place (a transient store or file error); a lost worker
// fails the session, and the window starts over in a new one on any GPU
// worker, at most Options.MaxRecoveries times. A deterministic failure
// (activities.IsFatal) fails the window at once.
func (w *Workflows) WalkForwardWindow(ctx workflow.Context, in activities.WalkForwardWindowInput) (*activities.WalkForwardWindowOutput, error) {
	o := w.Options.WithDefaults()
	what := fmt.Sprintf("walk-forward %s window %d", in.Spec.StudyID, in.Index)
	logger := workflow.GetLogger(ctx)
	var last error
	for attempt := 1; attempt <= o.MaxRecoveries; attempt++ {
		sess, err := o.acquireSession(ctx, nil, what)
		if err != nil {
			return nil, err
		}
		var out activities.WalkForwardWindowOutput
		err = workflow.ExecuteActivity(o.sessionCtx(sess.ctx), ta.WalkForwardWindow, in).Get(ctx, &out)
		sess.release()
		switch {
		case err == nil:
			return &out, nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case activities.IsFatal(err):
			return nil, err
		}
		last = err
		logger.Warn("The window failed; it starts over in a new session", "window", in.Index, "attempt", attempt, "error", err)
	}
	return nil, temporal.NewApplicationErrorWithCause(
		fmt.Sprintf("%s: failed %d times in a row (last: %s); see the GPU workers' logs", what, o.MaxRecoveries, errtext.Clean(last.Error())),
		ErrTypeTooManyRecoveries, last)
}

// planCtx is the context of WalkForwardPlan: a short, read-only activity
// on the GPU task queue outside a session (the GPU workers read the
// data), retried like a control activity.
func (o Options) planCtx(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              o.GPUTaskQueue,
		ScheduleToCloseTimeout: o.ControlTimeout,
		StartToCloseTimeout:    10 * time.Minute,
		RetryPolicy:            controlRetry(),
	})
}
