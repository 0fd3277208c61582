package workflows_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/workflows"
)

// cleanChild stands in for TrainingRun as a child: it trains for an hour
// and, when cancelled, cleans up (closes its trainer, records its status)
// on a disconnected context, as TrainingRun does; the n-th child started
// takes n minutes to clean up.
type cleanChild struct {
	interceptor.WorkerInterceptorBase
	mu               sync.Mutex
	started, cleaned int
	lastCleaned      time.Time // workflow time of the last clean-up's end
	parentEnded      time.Time // workflow time at which the parent returned
}

func (c *cleanChild) run(ctx workflow.Context, _ config.RunConfig, _ *workflows.RunState) (*workflows.RunResult, error) {
	c.mu.Lock()
	c.started++
	cleanup := time.Duration(c.started) * time.Minute
	c.mu.Unlock()
	err := workflow.Sleep(ctx, time.Hour)
	if temporal.IsCanceledError(err) {
		dctx, _ := workflow.NewDisconnectedContext(ctx)
		if workflow.Sleep(dctx, cleanup) == nil {
			c.mu.Lock()
			c.cleaned++
			c.lastCleaned = workflow.Now(dctx)
			c.mu.Unlock()
		}
	}
	return &workflows.RunResult{BestEpoch: 1}, err
}

// env returns a test environment with Retrain and Sweep, and c.run
// registered as TrainingRun.
func (c *cleanChild) env(t *testing.T) *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := s.NewTestWorkflowEnvironment()
	env.SetTestTimeout(30 * time.Second)
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{c}})
	wf := &workflows.Workflows{}
	env.RegisterWorkflowWithOptions(c.run, workflow.RegisterOptions{Name: workflows.TrainingRunName})
	env.RegisterWorkflowWithOptions(wf.Retrain, workflow.RegisterOptions{Name: workflows.RetrainName})
	env.RegisterWorkflowWithOptions(wf.Sweep, workflow.RegisterOptions{Name: workflows.SweepName})
	return env
}

// InterceptWorkflow records when the parent (Retrain or Sweep) returns.
func (c *cleanChild) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &parentEnd{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, c: c}
}

type parentEnd struct {
	interceptor.WorkflowInboundInterceptorBase
	c *cleanChild
}

func (p *parentEnd) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	res, err := p.Next.ExecuteWorkflow(ctx, in)
	if workflow.GetInfo(ctx).WorkflowType.Name != workflows.TrainingRunName {
		p.c.mu.Lock()
		p.c.parentEnded = workflow.Now(ctx)
		p.c.mu.Unlock()
	}
	return res, err
}

// checkWaited reports a parent that returned before its children had
// cleaned up.
func (c *cleanChild) checkWaited(t *testing.T, children int) {
	t.Helper()
	if c.started != children || c.cleaned != children {
		t.Errorf("%d runs started, %d cleaned up; want %d of each", c.started, c.cleaned, children)
	}
	if c.parentEnded.Before(c.lastCleaned) {
		t.Errorf("the parent returned at %s, before its children had cleaned up (%s): they were terminated",
			c.parentEnded.Format(time.TimeOnly), c.lastCleaned.Format(time.TimeOnly))
	}
}

// TestCancelledSweepWaitsForItsChildrenToCleanUp cancels a sweep while two
// of its four runs train: the children must be asked to cancel and be
// given the time to clean up (not terminated), and the sweep ends only
// after they did.
func TestCancelledSweepWaitsForItsChildrenToCleanUp(t *testing.T) {
	c := &cleanChild{}
	env := c.env(t)
	env.RegisterDelayedCallback(env.CancelWorkflow, 30*time.Minute)
	env.ExecuteWorkflow(workflows.SweepName, workflows.SweepInput{
		Grid: map[string][]json.RawMessage{"seed": raw("1", "2", "3", "4")}, MaxConcurrent: 2,
	})
	if err := env.GetWorkflowError(); !temporal.IsCanceledError(err) {
		t.Fatalf("sweep ended with %v, want canceled", err)
	}
	c.checkWaited(t, 2)
}

// TestClosedRetrainAndSweepLetTheirChildrenCleanUp closes a Retrain and a
// Sweep from outside while their runs train (the run timeout a Schedule may
// set; a terminate acts alike): their children must be asked to cancel,
// and clean up, not be terminated mid-epoch.
func TestClosedRetrainAndSweepLetTheirChildrenCleanUp(t *testing.T) {
	for _, tc := range []struct {
		name     string
		workflow string
		input    any
		children int
	}{
		{"retrain", workflows.RetrainName, workflows.RetrainInput{Lineage: "spx"}, 1},
		{"sweep", workflows.SweepName, workflows.SweepInput{Grid: map[string][]json.RawMessage{"seed": raw("1", "2", "3")}, MaxConcurrent: 2}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &cleanChild{}
			env := c.env(t)
			env.OnActivity(ca.LookupChampion, mock.Anything, mock.Anything).Return(activities.ChampionOutput{}, nil)
			env.SetWorkflowRunTimeout(30 * time.Minute)
			env.ExecuteWorkflow(tc.workflow, tc.input)
			if c.started != tc.children || c.cleaned != tc.children {
				t.Errorf("%d runs started, %d cleaned up; want %d of each", c.started, c.cleaned, tc.children)
			}
		})
	}
}
