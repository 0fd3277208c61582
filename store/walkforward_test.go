package store

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/metadata"
)

// sampleStudy is a study of two windows, two series, an agent at a seed
// above 2^63 (the bigint column's sign bit) and one baseline.
func sampleStudy(id string) metadata.WalkForwardStudy {
	t0 := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	st := metadata.WalkForwardStudy{
		ID: id, Config: json.RawMessage(`{"seed": 7, "epochs": 3}`),
		Series: json.RawMessage(`[{"name": "EURUSD"}, {"name": "GBPUSD"}]`), Layout: json.RawMessage(`{"train": "3y"}`),
		Seeds: []uint64{1, math.MaxUint64 - 1}, LeaveOut: []string{"GBPUSD"}, Gate: "window", Panel: true,
		TrialsStudy: 1, TrialsPrior: 4, TrialsTotal: 5, Device: "cuda:0 (H100)", Seconds: 12.5,
		Plan: json.RawMessage(`[{"window": 0, "series": "EURUSD"}]`), Notes: []string{"a note"}, Stopped: "deadline after 2 of 3 windows",
		Timings: json.RawMessage(`[{"window": 0, "phase": "train", "seconds": 3, "count": 2}]`),
	}
	for w := range 2 {
		from := t0.AddDate(w, 0, 0)
		st.Windows = append(st.Windows, metadata.WalkForwardWindow{Index: w, TrainFrom: from, ValidFrom: from.AddDate(0, 6, 0),
			TestFrom: from.AddDate(0, 9, 0), TestTo: from.AddDate(1, 0, 0)})
		for _, s := range []string{"EURUSD", "GBPUSD"} {
			for _, k := range []struct {
				strategy string
				seed     uint64
			}{{"agent", 1}, {"agent", math.MaxUint64 - 1}, {"buy_and_hold", 0}} {
				d0 := int32(18262 + 365*w)
				st.Results = append(st.Results, metadata.WalkForwardResult{Window: w, Series: s, Strategy: k.strategy, Seed: k.seed,
					Detail: "lookback 480", Note: "n", InTraining: s == "EURUSD", ValidSharpe: 0.5, ValidT: 2.25, Bars: 100,
					Sharpe: 1.25, SharpeLo: -0.5, SharpeHi: 3, SharpeT: 1.5, BarSharpe: 1.1, DaysPerYear: 252,
					TotalReturn: 0.1, MaxDrawdown: 0.05, Turnover: 12, Costs: 0.001,
					Days: []int32{d0, d0 + 1, d0 + 3}, Returns: []float64{0.01, -0.02, 1e-300}})
			}
		}
	}
	return st
}

// jsonEqual reports whether two JSON texts hold the same value (jsonb
// keeps neither spacing nor key order).
func jsonEqual(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

// TestWalkForwardStudyRoundTrips: a study written to PostgreSQL reads back
// equal, field for field: every result with its daily returns, a seed
// above 2^63, the header's JSON.
func TestWalkForwardStudyRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newPostgres(t)
	want := sampleStudy("wf-1")
	if err := s.RecordWalkForward(ctx, want); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetWalkForward(ctx, "wf-1")
	if err != nil {
		t.Fatal(err)
	}
	if got.CreatedAt.IsZero() {
		t.Error("created_at is not set")
	}
	for _, f := range []struct {
		name      string
		got, want json.RawMessage
	}{{"config", got.Config, want.Config}, {"series", got.Series, want.Series}, {"layout", got.Layout, want.Layout},
		{"plan", got.Plan, want.Plan}, {"timings", got.Timings, want.Timings}} {
		if !jsonEqual(t, f.got, f.want) {
			t.Errorf("%s = %s, want %s", f.name, f.got, f.want)
		}
	}
	got.CreatedAt = time.Time{}
	got.Config, got.Series, got.Layout, got.Plan, got.Timings = want.Config, want.Series, want.Layout, want.Plan, want.Timings
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read back:\n%+v\nwant\n%+v", got, want)
	}
}

// TestRecordWalkForwardReplacesTheStudy: recording a study of an id that
// exists leaves only the second one's rows; other studies keep theirs.
func TestRecordWalkForwardReplacesTheStudy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newPostgres(t)
	if err := s.RecordWalkForward(ctx, sampleStudy("other")); err != nil {
		t.Fatal(err)
	}
	first := sampleStudy("wf")
	if err := s.RecordWalkForward(ctx, first); err != nil {
		t.Fatal(err)
	}
	second := sampleStudy("wf")
	second.Windows = second.Windows[:1]
	second.Results = second.Results[:2]
	second.Results[0].Sharpe = -0.75
	second.Device = "cpu"
	for range 2 { // a retry of the second write changes nothing
		if err := s.RecordWalkForward(ctx, second); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.GetWalkForward(ctx, "wf")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Windows) != 1 || len(got.Results) != 2 || got.Results[0].Sharpe != -0.75 || got.Device != "cpu" {
		t.Errorf("after the rewrite: %d windows, %d results, first Sharpe %v, device %q; want 1, 2, -0.75, cpu",
			len(got.Windows), len(got.Results), got.Results[0].Sharpe, got.Device)
	}
	if n := count(t, s, "walkforward_results", "study = $1", "wf"); n != 2 {
		t.Errorf("%d result rows of the rewritten study, want 2", n)
	}
	if n := count(t, s, "walkforward_results", "study = $1", "other"); n != len(sampleStudy("other").Results) {
		t.Errorf("the other study has %d result rows, want %d", n, len(sampleStudy("other").Results))
	}
}

// TestRecordWalkForwardRejectsBadInput: a study no retry could store is
// refused with ErrInvalid, naming what is wrong, and writes nothing.
func TestRecordWalkForwardRejectsBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newPostgres(t)
	cases := []struct {
		name string
		edit func(*metadata.WalkForwardStudy)
		want string
	}{
		{"empty id", func(st *metadata.WalkForwardStudy) { st.ID = "" }, "empty study id"},
		{"config not an object", func(st *metadata.WalkForwardStudy) { st.Config = json.RawMessage(`[1]`) }, "config is not a JSON object"},
		{"series missing", func(st *metadata.WalkForwardStudy) { st.Series = nil }, "series is not a JSON array"},
		{"unknown window", func(st *metadata.WalkForwardStudy) { st.Results[3].Window = 9 }, "result 3 (agent on GBPUSD) is of window 9"},
		{"days and returns", func(st *metadata.WalkForwardStudy) { st.Results[1].Returns = st.Results[1].Returns[:1] }, "3 days but 1 returns"},
		{"window twice", func(st *metadata.WalkForwardStudy) { st.Windows[1].Index = 0 }, "window 0 (position 1) is listed twice"},
		{"duplicate result", func(st *metadata.WalkForwardStudy) { st.Results[1] = st.Results[0] }, "duplicate key"},
	}
	for _, c := range cases {
		st := sampleStudy("bad")
		c.edit(&st)
		err := s.RecordWalkForward(ctx, st)
		if !errors.Is(err, metadata.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error = %v, want ErrInvalid saying %q", c.name, err, c.want)
		}
	}
	if n := count(t, s, "walkforward_studies", "true"); n != 0 {
		t.Errorf("%d studies stored after refused writes, want 0", n)
	}
}

// TestGetWalkForwardOfAnUnknownStudyIsNotFound: the error wraps
// ErrNotFound and names the id.
func TestGetWalkForwardOfAnUnknownStudyIsNotFound(t *testing.T) {
	t.Parallel()
	_, err := newPostgres(t).GetWalkForward(context.Background(), "nope")
	if !errors.Is(err, metadata.ErrNotFound) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("error = %v, want ErrNotFound naming the id", err)
	}
}

// TestSQLiteStoreRefusesWalkForwardStudies: the SQLite store says it
// keeps no studies and what to do, wrapping errors.ErrUnsupported.
func TestSQLiteStoreRefusesWalkForwardStudies(t *testing.T) {
	t.Parallel()
	s := newSQLite(t)
	ctx := context.Background()
	errW := s.RecordWalkForward(ctx, sampleStudy("wf"))
	_, errR := s.GetWalkForward(ctx, "wf")
	for _, err := range []error{errW, errR} {
		if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "not supported by the SQLite store") ||
			!strings.Contains(err.Error(), "DATABASE_URL") {
			t.Errorf("error = %v, want one saying SQLite does not keep studies and to set DATABASE_URL", err)
		}
	}
}
