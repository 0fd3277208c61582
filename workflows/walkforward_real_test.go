package workflows_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/activities/activitiestest"
	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/files"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/store"
	"github.com/dqnflow/dqnflow/trainer/cpu"
	"github.com/dqnflow/dqnflow/walkforward"
	"github.com/dqnflow/dqnflow/workflows"
)

// TestWalkForwardOnRealActivitiesStoresTheStudyRunGives runs the
// WalkForward workflow with the real activities (the CPU backend, the
// data through data roots, PostgreSQL) on walkforward's fixture study
// (three H4 forex slices, two weekly windows, two seeds, GBPUSD left out)
// in the SDK's test environment: the study read back from the store is
// the one walkforward.Study.Run gives in process, every result with its
// daily returns, in the same order.
func TestWalkForwardOnRealActivitiesStoresTheStudyRunGives(t *testing.T) {
	ctx := context.Background()
	st, src, spec := fixtureStudy(t, "dqnflow_wf_wf", "wf-real")
	cfg, series := spec.Config, spec.Series

	env := walkForwardEnv(2 * time.Minute)
	env.RegisterActivity(&activities.Trainer{Backend: cpu.Backend{}, Store: st, Data: src, HeartbeatInterval: 10 * time.Millisecond})
	env.RegisterActivity(&activities.Control{Store: st})
	env.ExecuteWorkflow(workflows.WalkForwardName, workflows.WalkForwardInput{WalkForwardSpec: spec, MaxConcurrent: 2})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("study failed: %v", err)
	}
	var res workflows.WalkForwardResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}

	study := &walkforward.Study{Config: cfg, Series: series, Source: src, Layout: spec.Layout, Seeds: spec.Seeds,
		LeaveOut: spec.LeaveOut, PriorTrials: spec.PriorTrials, Train: walkforward.LocalTrainer(cpu.Backend{}, checkpoint.Options{}, nil)}
	want, err := study.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantRec, err := walkforward.StudyRecord("wf-real", want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.GetWalkForward(ctx, "wf-real")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Results) == 0 || !reflect.DeepEqual(got.Results, wantRec.Results) {
		t.Errorf("stored %d results; want Run's %d, equal field for field", len(got.Results), len(wantRec.Results))
	}
	if !reflect.DeepEqual(got.Windows, wantRec.Windows) || got.TrialsTotal != 4 || got.Gate != walkforward.GateWindow {
		t.Errorf("stored windows %+v, trials %d, gate %q; want Run's windows, 4 trials, gate window", got.Windows, got.TrialsTotal, got.Gate)
	}
	for _, f := range []struct {
		name      string
		got, want json.RawMessage
	}{{"plan", got.Plan, wantRec.Plan}, {"layout", got.Layout, wantRec.Layout}} {
		var a, b any
		_ = json.Unmarshal(f.got, &a)
		_ = json.Unmarshal(f.want, &b)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("stored %s %s, want Run's %s", f.name, f.got, f.want)
		}
	}
	if len(res.Output.Results) != len(want.Results) || res.Recorded != len(want.Results) || len(res.Output.Results[0].Returns) != 0 {
		t.Errorf("workflow result: %d results (recorded %d), first with %d returns; want %d without returns",
			len(res.Output.Results), res.Recorded, len(res.Output.Results[0].Returns), len(want.Results))
	}
}

// fixtureStudy is walkforward's fixture study (three H4 forex slices,
// two weekly windows, two seeds, GBPUSD left out, a tiny agent) under
// id, with a fresh PostgreSQL schema of the given prefix, migrated, and
// the fixture's directory as the data root.
func fixtureStudy(t *testing.T, schema, id string) (*store.Store, prices.Source, activities.WalkForwardSpec) {
	t.Helper()
	st := activitiestest.NewPostgresStore(t, schema)
	dir, _ := filepath.Abs("../walkforward/testdata")
	roots, err := files.NewRoots(dir)
	if err != nil {
		t.Fatal(err)
	}
	src := prices.Source{Roots: roots}

	spec := activitiestest.WalkForwardSpec(t, dir, id)
	spec.PriorTrials = 3
	return st, src, spec
}
