package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/walkforward"
	"github.com/dqnflow/dqnflow/workflows"
)

// fakeStudy stands in for the walk-forward activities: a plan of n
// windows of one series, and a window activity that returns one agent
// result whose Sharpe is its window's index. fail[i] is how many times
// window i's activity fails (retryably) before it succeeds.
type fakeStudy struct {
	n     int
	fail  map[int]int
	fatal int // the window whose activity fails non-retryably, or -1

	mu       sync.Mutex
	attempts map[int]int
	ids      map[int]string // the workflow id each window's activity ran in
	headers  []activities.WalkForwardHeaderInput
	order    []int // the windows in the order their activities ended
	// before, when set, holds window 0 until window 1 has ended, so that
	// the windows end out of order.
	before chan struct{}
	// stored are the windows WalkForwardResume says an earlier execution
	// recorded; storedErr, when set, is its answer instead.
	stored    []int
	storedErr error
	resumes   []activities.WalkForwardResumeInput
}

func (f *fakeStudy) windows() []walkforward.Window {
	t0 := time.Date(2015, 1, 5, 0, 0, 0, 0, time.UTC)
	var ws []walkforward.Window
	for i := range f.n {
		from := t0.AddDate(0, 0, 7*i)
		ws = append(ws, walkforward.Window{Index: i, TrainFrom: t0, ValidFrom: from.AddDate(0, 0, 7), TestFrom: from.AddDate(0, 0, 14), TestTo: from.AddDate(0, 0, 21)})
	}
	return ws
}

func (f *fakeStudy) register(env *testsuite.TestWorkflowEnvironment) {
	f.attempts, f.ids = map[int]int{}, map[int]string{}
	env.RegisterActivityWithOptions(func(ctx context.Context, in activities.WalkForwardSpec) (activities.WalkForwardPlanOutput, error) {
		var p walkforward.Plan
		p.Layout, p.Windows = in.Layout, f.windows()
		for _, w := range p.Windows {
			p.Plan = append(p.Plan, walkforward.SeriesWindow{Window: w.Index, Series: "A"})
		}
		return activities.WalkForwardPlanOutput{Plan: p}, nil
	}, activity.RegisterOptions{Name: "WalkForwardPlan"})
	env.RegisterActivityWithOptions(func(ctx context.Context, in activities.WalkForwardResumeInput) (activities.WalkForwardResumeOutput, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.resumes = append(f.resumes, in)
		var out activities.WalkForwardResumeOutput
		for _, i := range f.stored {
			w := f.windows()[i]
			out.Windows = append(out.Windows, activities.WalkForwardWindowOutput{Recorded: 1, Output: walkforward.Output{Windows: []walkforward.Window{w}, Device: "earlier",
				Results: []walkforward.Result{{Window: i, Series: "A", Strategy: walkforward.StrategyAgent, Seed: 1, Sharpe: float64(i)}}}})
		}
		return out, f.storedErr
	}, activity.RegisterOptions{Name: "WalkForwardResume"})
	env.RegisterActivityWithOptions(func(ctx context.Context, in activities.WalkForwardHeaderInput) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.headers = append(f.headers, in)
		return nil
	}, activity.RegisterOptions{Name: "RecordWalkForwardHeader"})
	env.RegisterActivityWithOptions(func(ctx context.Context, in activities.WalkForwardWindowInput) (activities.WalkForwardWindowOutput, error) {
		i := in.Index
		f.mu.Lock()
		f.attempts[i]++
		f.ids[i] = activity.GetInfo(ctx).WorkflowExecution.ID
		failNow := f.attempts[i] <= f.fail[i]
		f.mu.Unlock()
		if i == f.fatal {
			return activities.WalkForwardWindowOutput{}, temporal.NewNonRetryableApplicationError("training diverged", activities.ErrTypeNonFinite, nil)
		}
		if failNow {
			return activities.WalkForwardWindowOutput{}, errors.New("worker lost mid-window")
		}
		if i == 0 && f.before != nil {
			select {
			case <-f.before:
			case <-time.After(10 * time.Second):
				return activities.WalkForwardWindowOutput{}, temporal.NewNonRetryableApplicationError("window 1 never ended", "Test", nil)
			}
		}
		w := f.windows()[i]
		out := walkforward.Output{Windows: []walkforward.Window{w}, Plan: []walkforward.SeriesWindow{{Window: i, Series: "A"}},
			Results: []walkforward.Result{{Window: i, Series: "A", Strategy: walkforward.StrategyAgent, Seed: 1, Sharpe: float64(i)}},
			Timings: []walkforward.Timing{{Window: i, Phase: "train", Seconds: 1, Count: 1}}, Device: "cpu"}
		f.mu.Lock()
		f.order = append(f.order, i)
		f.mu.Unlock()
		if i == 1 && f.before != nil {
			close(f.before)
		}
		return activities.WalkForwardWindowOutput{Output: out, Recorded: 1}, nil
	}, activity.RegisterOptions{Name: "WalkForwardWindow"})
}

// newStudyEnv is a test environment with sessions and the walk-forward
// workflows registered, its activities f's.
func newStudyEnv(t *testing.T, f *fakeStudy) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	env := walkForwardEnv(30 * time.Second)
	f.register(env)
	return env
}

// walkForwardEnv is a test environment with sessions and the walk-forward
// workflows registered, that fails a test running longer than timeout;
// the caller registers the activities.
func walkForwardEnv(timeout time.Duration) *testsuite.TestWorkflowEnvironment {
	env := sessionEnv()
	env.SetTestTimeout(timeout)
	wf := &workflows.Workflows{}
	env.RegisterWorkflowWithOptions(wf.WalkForward, workflow.RegisterOptions{Name: workflows.WalkForwardName})
	env.RegisterWorkflowWithOptions(wf.WalkForwardWindow, workflow.RegisterOptions{Name: workflows.WalkForwardWindowName})
	return env
}

func studyInput(id string, concurrent int) workflows.WalkForwardInput {
	return workflows.WalkForwardInput{WalkForwardSpec: activities.WalkForwardSpec{StudyID: id,
		Series: []prices.SeriesSpec{{Name: "A", Path: "a.csv"}}, Seeds: []uint64{1}}, MaxConcurrent: concurrent}
}

// TestWalkForwardRunsAChildPerWindowAndMergesInWindowOrder: three
// windows, two at a time, window 0 ending after window 1 and window 1's
// activity failing once: each window runs in its own child (id from the
// study id and the index), the failed activity is retried and the study
// completes, the merged output lists the windows, plan rows, results and
// timings in window order, and the header is recorded before the
// windows and again at the end with all of them.
func TestWalkForwardRunsAChildPerWindowAndMergesInWindowOrder(t *testing.T) {
	f := &fakeStudy{n: 3, fail: map[int]int{1: 1}, fatal: -1, before: make(chan struct{})}
	env := newStudyEnv(t, f)
	env.ExecuteWorkflow(workflows.WalkForwardName, studyInput("wf-study", 2))
	res := completed[workflows.WalkForwardResult](t, env)
	v, err := env.QueryWorkflow(workflows.WalkForwardProgressQuery)
	if err != nil {
		t.Fatal(err)
	}
	var p workflows.WalkForwardProgress
	if err := v.Get(&p); err != nil {
		t.Fatal(err)
	}
	if p.StudyID != "wf-study" || p.Status != "completed" || p.Windows != 3 || p.Done != 3 || len(p.Running) != 0 {
		t.Errorf("progress %+v, want wf-study completed, 3 of 3 windows done, none running", p)
	}
	for i := range 3 {
		if want := fmt.Sprintf("wf-study-window-%03d", i); f.ids[i] != want {
			t.Errorf("window %d ran in workflow %q, want %q", i, f.ids[i], want)
		}
	}
	if f.attempts[1] != 2 || f.attempts[0] != 1 || f.attempts[2] != 1 {
		t.Errorf("attempts %v, want window 1 twice (it failed once), the others once", f.attempts)
	}
	if f.order[0] == 0 {
		t.Errorf("windows ended in the order %v; the test wants window 0 after window 1", f.order)
	}
	out := res.Output
	if res.StudyID != "wf-study" || res.Recorded != 3 || len(out.Windows) != 3 || len(out.Plan) != 3 || len(out.Results) != 3 || len(out.Timings) != 3 {
		t.Fatalf("result %+v: want study wf-study, 3 recorded, 3 windows, plan rows, results and timings", res)
	}
	for i := range 3 {
		if out.Windows[i].Index != i || out.Plan[i].Window != i || out.Results[i].Window != i || out.Results[i].Sharpe != float64(i) || out.Timings[i].Window != i {
			t.Errorf("position %d: window %d, plan %d, result %d (Sharpe %v), timing %d; want window %d throughout",
				i, out.Windows[i].Index, out.Plan[i].Window, out.Results[i].Window, out.Results[i].Sharpe, out.Timings[i].Window, i)
		}
	}
	if out.Gate != walkforward.GateWindow || out.Trials.Total != 1 || out.Device != "cpu" || out.Stopped != "" {
		t.Errorf("header gate %q, trials %+v, device %q, stopped %q", out.Gate, out.Trials, out.Device, out.Stopped)
	}
	if len(f.headers) != 2 || len(f.headers[0].Output.Windows) != 3 || len(f.headers[0].Output.Timings) != 0 ||
		len(f.headers[1].Output.Windows) != 3 || len(f.headers[1].Output.Timings) != 3 || f.headers[1].Output.Results != nil {
		t.Errorf("headers recorded: %+v; want the plan's before the windows and the whole study's (no results) after", f.headers)
	}
}

// TestWalkForwardStopsAtAWindowThatFailsForGood: a window whose
// activity fails non-retryably fails the study after the window before
// it; the last header lists the windows that ran and says why it
// stopped, and the later windows never start.
func TestWalkForwardStopsAtAWindowThatFailsForGood(t *testing.T) {
	f := &fakeStudy{n: 3, fatal: 1}
	env := newStudyEnv(t, f)
	env.ExecuteWorkflow(workflows.WalkForwardName, studyInput("wf-bad", 1))
	if err := env.GetWorkflowError(); !hasErrorType(err, workflows.ErrTypeWindowFailed) || !hasErrorType(err, activities.ErrTypeNonFinite) {
		t.Fatalf("error %v, want %s caused by the window's %s", err, workflows.ErrTypeWindowFailed, activities.ErrTypeNonFinite)
	}
	if f.attempts[1] != 1 {
		t.Errorf("the failed window ran %d times, want once (its failure is fatal)", f.attempts[1])
	}
	if f.attempts[2] != 0 {
		t.Errorf("window 2 ran %d times after window 1 failed", f.attempts[2])
	}
	last := f.headers[len(f.headers)-1].Output
	if len(last.Windows) != 1 || last.Stopped == "" {
		t.Errorf("last header: %d windows, stopped %q; want window 0 alone and why the study stopped", len(last.Windows), last.Stopped)
	}
}

// TestWalkForwardRefusesAnInputNoActivityCouldFix: no series fails at
// once, non-retryably, before any activity.
func TestWalkForwardRefusesAnInputNoActivityCouldFix(t *testing.T) {
	f := &fakeStudy{n: 1, fatal: -1}
	env := newStudyEnv(t, f)
	in := studyInput("wf-none", 1)
	in.Series = nil
	env.ExecuteWorkflow(workflows.WalkForwardName, in)
	var ae *temporal.ApplicationError
	if err := env.GetWorkflowError(); !errors.As(err, &ae) || ae.Type() != activities.ErrTypeInvalidConfig || len(f.headers) != 0 {
		t.Fatalf("error %v, %d headers; want InvalidConfig and nothing recorded", err, len(f.headers))
	}

}

// TestWalkForwardWindowStartsOverInANewSession: a window whose activity
// keeps failing past its retries in place (as when its worker is lost
// and the session with it) starts over in a new session, and the study
// completes; one that fails Options.MaxRecoveries times in a row fails
// the study.
func TestWalkForwardWindowStartsOverInANewSession(t *testing.T) {
	f := &fakeStudy{n: 2, fail: map[int]int{1: 4}, fatal: -1}
	env := newStudyEnv(t, f)
	env.ExecuteWorkflow(workflows.WalkForwardName, studyInput("wf-lost", 1))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("study failed: %v", err)
	}
	if f.attempts[1] != 5 {
		t.Errorf("window 1 ran %d times, want 5: 3 in the first session, 2 in the second", f.attempts[1])
	}

	f = &fakeStudy{n: 1, fail: map[int]int{0: 1000}, fatal: -1}
	env = newStudyEnv(t, f)
	env.ExecuteWorkflow(workflows.WalkForwardName, studyInput("wf-hopeless", 1))
	if err := env.GetWorkflowError(); !hasErrorType(err, workflows.ErrTypeWindowFailed) || !hasErrorType(err, workflows.ErrTypeTooManyRecoveries) {
		t.Fatalf("error %v, want %s caused by %s", err, workflows.ErrTypeWindowFailed, workflows.ErrTypeTooManyRecoveries)
	}
	if want := 3 * workflows.DefaultOptions().MaxRecoveries; f.attempts[0] != want {
		t.Errorf("window 0 ran %d times, want %d (3 a session, %d sessions)", f.attempts[0], want, workflows.DefaultOptions().MaxRecoveries)
	}
}

// TestWalkForwardResumesTheWindowsTheStoreHolds: a study whose windows
// 0 and 2 of 4 an earlier execution under its id recorded (as
// WalkForwardResume answers) trains only windows 1 and 3, asks before
// its first header, and merges all four in window order; with Fresh it
// asks nothing and trains all four; a stored study that differs fails
// the study at once, before any header or window.
func TestWalkForwardResumesTheWindowsTheStoreHolds(t *testing.T) {
	f := &fakeStudy{n: 4, fatal: -1, stored: []int{0, 2}}
	env := newStudyEnv(t, f)
	env.ExecuteWorkflow(workflows.WalkForwardName, studyInput("wf-again", 2))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("study failed: %v", err)
	}
	var res workflows.WalkForwardResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if f.attempts[0] != 0 || f.attempts[2] != 0 || f.attempts[1] != 1 || f.attempts[3] != 1 {
		t.Errorf("window attempts %v; want windows 1 and 3 once, 0 and 2 never (recorded)", f.attempts)
	}
	if len(f.resumes) != 1 || len(f.resumes[0].Header.Windows) != 4 || f.resumes[0].StudyID != "wf-again" {
		t.Errorf("resume asked %+v; want once, for wf-again's 4 windows", f.resumes)
	}
	out := res.Output
	if len(out.Results) != 4 || res.Recorded != 4 || fmt.Sprint(res.Resumed) != "[0 2]" || out.Device != "earlier, cpu" {
		t.Fatalf("result: %d results, %d recorded, resumed %v, device %q; want 4, 4, [0 2], \"earlier, cpu\"", len(out.Results), res.Recorded, res.Resumed, out.Device)
	}
	for i, r := range out.Results {
		if r.Window != i {
			t.Errorf("result %d is window %d's", i, r.Window)
		}
	}
	if len(f.headers) != 2 || len(f.headers[1].Output.Windows) != 4 || !strings.Contains(strings.Join(f.headers[1].Output.Notes, " "), "windows [0 2] resumed") {
		t.Errorf("headers %+v; want the last with 4 windows and a note of the resumed ones", f.headers)
	}

	f = &fakeStudy{n: 2, fatal: -1, stored: []int{0, 1}}
	env = newStudyEnv(t, f)
	in := studyInput("wf-fresh", 1)
	in.Fresh = true
	env.ExecuteWorkflow(workflows.WalkForwardName, in)
	if err := env.GetWorkflowError(); err != nil || len(f.resumes) != 0 || f.attempts[0] != 1 || f.attempts[1] != 1 {
		t.Errorf("fresh study: error %v, %d resume calls, attempts %v; want none, none, both windows once", err, len(f.resumes), f.attempts)
	}

	f = &fakeStudy{n: 2, fatal: -1, storedErr: temporal.NewNonRetryableApplicationError("the study stored under this id has another config", activities.ErrTypeInvalidConfig, nil)}
	env = newStudyEnv(t, f)
	env.ExecuteWorkflow(workflows.WalkForwardName, studyInput("wf-other", 1))
	if err := env.GetWorkflowError(); !hasErrorType(err, activities.ErrTypeInvalidConfig) || len(f.headers) != 0 || len(f.attempts) != 0 {
		t.Errorf("a different stored study: error %v, %d headers, attempts %v; want InvalidConfig, nothing recorded or trained", err, len(f.headers), f.attempts)
	}
}

// hasErrorType reports whether an application error of type typ is in
// err's chain of causes.
func hasErrorType(err error, typ string) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		if ae, ok := err.(*temporal.ApplicationError); ok && ae.Type() == typ {
			return true
		}
	}
	return false
}
