package metadata

import (
	"encoding/json"
	"time"
)

// WalkForwardStudy is one walk-forward study as the store keeps it: the
// rows of walkforward_studies, walkforward_windows and walkforward_results.
// The store does not import package walkforward (which links the
// trainers); package cli converts walkforward.Output to and from it. The
// JSON fields hold the Go values of walkforward.Output as its
// results.json encodes them.
type WalkForwardStudy struct {
	ID        string
	CreatedAt time.Time       // set by the store
	Config    json.RawMessage // a JSON object: the agent's run config
	Series    json.RawMessage // a JSON array: the series specs
	Layout    json.RawMessage // a JSON object: the window layout
	Seeds     []uint64
	LeaveOut  []string
	Gate      string
	Panel     bool
	// TrialsStudy, TrialsPrior and TrialsTotal are walkforward.Trials.
	TrialsStudy int
	TrialsPrior int
	TrialsTotal int
	Device      string
	Seconds     float64
	Plan        json.RawMessage // a JSON array: every series in every window
	Notes       []string
	Stopped     string          // why the study ended before its last window, or ""
	Timings     json.RawMessage // a JSON array of phase timings
	Windows     []WalkForwardWindow
	Results     []WalkForwardResult
}

// WalkForwardWindow is one step of the walk-forward (walkforward.Window).
type WalkForwardWindow struct {
	Index     int
	TrainFrom time.Time
	ValidFrom time.Time
	TestFrom  time.Time
	TestTo    time.Time
}

// WalkForwardResult is one strategy on one series over one window's test
// block (walkforward.Result, field for field). Window, Series, Strategy
// and Seed are its key within a study.
type WalkForwardResult struct {
	Window      int
	Series      string
	Strategy    string
	Seed        uint64
	Detail      string
	Note        string
	InTraining  bool
	ValidSharpe float64
	ValidT      float64
	Bars        int
	Sharpe      float64
	SharpeLo    float64
	SharpeHi    float64
	SharpeT     float64
	BarSharpe   float64
	DaysPerYear float64
	TotalReturn float64
	MaxDrawdown float64
	Turnover    float64
	Costs       float64
	Days        []int32
	Returns     []float64
}
