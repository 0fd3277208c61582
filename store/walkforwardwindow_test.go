package store

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/metadata"
)

// TestWalkForwardRecordedAWindowAtATimeReadsAsAWholeStudy: a header, then
// the windows in reverse order, each twice (a retried activity), then the
// header again with the final plan, read back as the study recorded
// whole: windows by index, results in window order, one copy each.
func TestWalkForwardRecordedAWindowAtATimeReadsAsAWholeStudy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newPostgres(t)
	want := sampleStudy("wf-w")
	head := want
	head.Plan, head.Timings, head.Results = nil, nil, nil
	if err := s.RecordWalkForwardHeader(ctx, head); err != nil {
		t.Fatal(err)
	}
	for k := len(want.Windows) - 1; k >= 0; k-- {
		w := want.Windows[k]
		var res []metadata.WalkForwardResult
		for _, r := range want.Results {
			if r.Window == w.Index {
				res = append(res, r)
			}
		}
		for range 2 {
			if err := s.RecordWalkForwardWindow(ctx, want.ID, w, res); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.RecordWalkForwardHeader(ctx, want); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetWalkForward(ctx, want.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(t, got.Plan, want.Plan) || !jsonEqual(t, got.Timings, want.Timings) {
		t.Errorf("plan %s, timings %s; want the final header's", got.Plan, got.Timings)
	}
	got.CreatedAt = time.Time{}
	got.Config, got.Series, got.Layout, got.Plan, got.Timings = want.Config, want.Series, want.Layout, want.Plan, want.Timings
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read back:\n%+v\nwant\n%+v", got, want)
	}
	if n := count(t, s, "walkforward_results", "study = $1", want.ID); n != len(want.Results) {
		t.Errorf("%d result rows, want %d", n, len(want.Results))
	}
}

// TestWalkForwardHeaderDropsAnEarlierStudysWindows: a header whose
// windows differ from the stored ones (an earlier study of the same id)
// replaces those windows and deletes their results; matching windows
// keep theirs.
func TestWalkForwardHeaderDropsAnEarlierStudysWindows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newPostgres(t)
	old := sampleStudy("wf-again")
	if err := s.RecordWalkForward(ctx, old); err != nil {
		t.Fatal(err)
	}
	head := sampleStudy("wf-again")
	head.Windows[1].TestTo = head.Windows[1].TestTo.Add(24 * time.Hour)
	head.Results = nil
	if err := s.RecordWalkForwardHeader(ctx, head); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetWalkForward(ctx, "wf-again")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Windows, head.Windows) || len(got.Results) != len(old.Results)/2 || got.Results[0].Window != 0 {
		t.Errorf("windows %+v, %d results after the new header; want the new windows, window 0's %d results alone", got.Windows, len(got.Results), len(old.Results)/2)
	}
}

// TestRecordWalkForwardWindowNeedsItsStudy: a window of a study without a
// header is refused with ErrNotFound; one holding another window's
// result with ErrInvalid.
func TestRecordWalkForwardWindowNeedsItsStudy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newPostgres(t)
	st := sampleStudy("wf-none")
	if err := s.RecordWalkForwardWindow(ctx, "wf-none", st.Windows[0], st.Results[:1]); !errors.Is(err, metadata.ErrNotFound) {
		t.Errorf("window of an unknown study: %v, want ErrNotFound", err)
	}
	head := st
	head.Results = nil
	if err := s.RecordWalkForwardHeader(ctx, head); err != nil {
		t.Fatal(err)
	}
	last := st.Results[len(st.Results)-1] // window 1's
	if err := s.RecordWalkForwardWindow(ctx, "wf-none", st.Windows[0], []metadata.WalkForwardResult{last}); !errors.Is(err, metadata.ErrInvalid) {
		t.Errorf("window 0 holding a result of window 1: %v, want ErrInvalid", err)
	}
}
