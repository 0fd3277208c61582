package walkforward

import (
	"context"
	"reflect"
	"testing"
)

// TestRunWindowsAddUpToRun: the windows run one by one, their outputs
// appended in window order, are the study Run runs: the same calendar,
// the same results (the CPU trainer is deterministic) and the same notes.
func TestRunWindowsAddUpToRun(t *testing.T) {
	s := fixtureStudy(t)
	ctx := context.Background()
	whole, err := s.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Lay(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p.Windows, whole.Windows) || !reflect.DeepEqual(p.Plan, whole.Plan) || !reflect.DeepEqual(p.Layout, whole.Layout) {
		t.Fatalf("Lay: %+v, want Run's calendar %+v", p, whole.Windows)
	}
	var got Output
	for i := range p.Windows {
		o, err := s.RunWindow(ctx, i)
		if err != nil {
			t.Fatalf("window %d: %v", i, err)
		}
		if len(o.Windows) != 1 || o.Windows[0] != p.Windows[i] || len(o.Plan) != len(s.Series) {
			t.Fatalf("window %d: windows %v, %d plan rows", i, o.Windows, len(o.Plan))
		}
		for _, r := range o.Results {
			if r.Window != i {
				t.Fatalf("window %d holds a result of window %d", i, r.Window)
			}
		}
		got.Windows, got.Plan = append(got.Windows, o.Windows...), append(got.Plan, o.Plan...)
		got.Results, got.Notes = append(got.Results, o.Results...), append(got.Notes, o.Notes...)
	}
	if !reflect.DeepEqual(got.Windows, whole.Windows) || !reflect.DeepEqual(got.Plan, whole.Plan) {
		t.Fatal("the windows' calendars differ from Run's")
	}
	if !reflect.DeepEqual(got.Results, whole.Results) {
		t.Fatalf("the windows' %d results differ from Run's %d", len(got.Results), len(whole.Results))
	}
	if !reflect.DeepEqual(got.Notes, whole.Notes) {
		t.Fatalf("notes %q, want %q", got.Notes, whole.Notes)
	}
	if _, err := s.RunWindow(ctx, len(p.Windows)); err == nil {
		t.Fatal("a window past the last ran")
	}
}
