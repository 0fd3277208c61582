package activities_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/activities/activitiestest"
	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/files"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/trainer/cpu"
	"github.com/dqnflow/dqnflow/walkforward"
)

// wfSpec is walkforward's fixture study under the id "wf-activity".
func wfSpec(t *testing.T, dir string) activities.WalkForwardSpec {
	return activitiestest.WalkForwardSpec(t, dir, "wf-activity")
}

// TestWalkForwardWindowTrainsOnTheCPUAndRecordsTheWindow runs the
// study's plan, its header and window 1 through the activities, on the
// CPU backend with the data read through the worker's data roots, into
// PostgreSQL: the window's results are the ones RunWindow gives in
// process (same seeds, same deterministic backend), stored with their
// daily returns, and the activity's own result carries none; a retried
// window leaves one copy.
func TestWalkForwardWindowTrainsOnTheCPUAndRecordsTheWindow(t *testing.T) {
	ctx := context.Background()
	st := activitiestest.NewPostgresStore(t, "dqnflow_act_wf")
	dir, _ := filepath.Abs("../walkforward/testdata")
	roots, err := files.NewRoots(dir)
	if err != nil {
		t.Fatal(err)
	}
	src := prices.Source{Roots: roots}
	tr := &activities.Trainer{Backend: cpu.Backend{}, Store: st, Data: src, HeartbeatInterval: time.Millisecond}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(tr)
	ctl := &activities.Control{Store: st}
	env.RegisterActivity(ctl)
	spec := wfSpec(t, dir)

	v, err := env.ExecuteActivity(tr.WalkForwardPlan, spec)
	if err != nil {
		t.Fatal(err)
	}
	var plan activities.WalkForwardPlanOutput
	if err := v.Get(&plan); err != nil {
		t.Fatal(err)
	}
	if len(plan.Plan.Windows) != 2 || !plan.Plan.Windows[1].TestFrom.Equal(time.Date(2015, 3, 25, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("plan windows %+v, want the fixture's two, the second testing from 2015-03-25", plan.Plan.Windows)
	}
	head := walkforward.Output{Config: spec.Config, Series: spec.Series, Layout: plan.Plan.Layout, Seeds: spec.Seeds,
		LeaveOut: spec.LeaveOut, Gate: walkforward.GateWindow, Trials: walkforward.Trials{Study: 1, Total: 1},
		Windows: plan.Plan.Windows, Plan: plan.Plan.Plan}
	if _, err := env.ExecuteActivity(ctl.RecordWalkForwardHeader, activities.WalkForwardHeaderInput{StudyID: spec.StudyID, Output: head}); err != nil {
		t.Fatal(err)
	}

	var out activities.WalkForwardWindowOutput
	for range 2 { // the second is a retry
		v, err := env.ExecuteActivity(tr.WalkForwardWindow, activities.WalkForwardWindowInput{Spec: spec, Index: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Get(&out); err != nil {
			t.Fatal(err)
		}
	}
	// The same window in process, through the same data roots.
	study := &walkforward.Study{Config: spec.Config, Series: spec.Series, Source: src, Layout: spec.Layout, Seeds: spec.Seeds,
		LeaveOut: spec.LeaveOut, Train: walkforward.LocalTrainer(cpu.Backend{}, checkpoint.Options{}, nil)}
	want, err := study.RunWindow(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	agents := 0
	for _, r := range want.Results {
		if r.Strategy == walkforward.StrategyAgent {
			agents++
		}
	}
	if agents == 0 || out.Recorded != len(want.Results) || len(out.Output.Results) != len(want.Results) {
		t.Fatalf("recorded %d, returned %d results; want the %d (%d of the agent) of RunWindow", out.Recorded, len(out.Output.Results), len(want.Results), agents)
	}
	got, err := st.GetWalkForward(ctx, spec.StudyID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Windows) != 2 || len(got.Results) != len(want.Results) {
		t.Fatalf("stored %d windows, %d results; want 2 windows (the header's) and window 1's %d results once", len(got.Windows), len(got.Results), len(want.Results))
	}
	for i, w := range want.Results {
		g, r := got.Results[i], out.Output.Results[i]
		if g.Window != 1 || g.Series != w.Series || g.Strategy != w.Strategy || g.Seed != w.Seed || g.Sharpe != w.Sharpe ||
			g.TotalReturn != w.TotalReturn || len(g.Returns) != len(w.Returns) || len(w.Returns) == 0 {
			t.Errorf("stored result %d: %+v\nwant %+v", i, g, w)
		}
		if r.Sharpe != w.Sharpe || r.Returns != nil || r.Days != nil {
			t.Errorf("returned result %d: Sharpe %v, %d returns; want %v and none", i, r.Sharpe, len(r.Returns), w.Sharpe)
		}
	}
}

// TestWalkForwardPlanRefusesASeriesOutsideTheDataRoots: a series the
// worker may not read fails the study for good, naming the series and
// the data roots.
func TestWalkForwardPlanRefusesASeriesOutsideTheDataRoots(t *testing.T) {
	dir, _ := filepath.Abs("../walkforward/testdata")
	roots, err := files.NewRoots(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tr := &activities.Trainer{Backend: cpu.Backend{}, Data: prices.Source{Roots: roots}}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(tr)
	_, err = env.ExecuteActivity(tr.WalkForwardPlan, wfSpec(t, dir))
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != activities.ErrTypeInvalidConfig || !ae.NonRetryable() ||
		!strings.Contains(err.Error(), "EURUSD_H4") || !strings.Contains(err.Error(), "data roots") {
		t.Fatalf("error = %v, want a non-retryable InvalidConfig naming the series and the data roots", err)
	}
}
