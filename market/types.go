package market

import (
	"fmt"

	"github.com/dqnflow/dqnflow/prices"
)

// NumFeatures is the number of market features per bar (features.go
// documents each one). NumAgentFeatures describe the agent's own position.
// An observation is the bar's normalised features followed by the agent's.
const (
	NumFeatures      = 56
	NumAgentFeatures = 8
	ObsDim           = NumFeatures + NumAgentFeatures
)

// The three action branches: direction, size and exit rule.
const (
	NumDirections = 3 // 0 short, 1 flat, 2 long
	NumSizes      = 4 // (k+1)/4 of max contracts, k = 0..3
	NumExits      = 3 // 0 none, 1 stop at 1×ATR, 2 stop at 2×ATR
)

// BranchSizes lists the number of actions of each branch, in branch order.
var BranchSizes = [3]int{NumDirections, NumSizes, NumExits}

// Action is one choice per branch.
type Action struct {
	Dir  int `json:"direction"`
	Size int `json:"size"`
	Exit int `json:"exit"`
}

// Check says whether a lies inside the action space: each branch's choice
// in [0, that branch's size).
func (a Action) Check() error {
	switch {
	case a.Dir < 0 || a.Dir >= NumDirections:
		return fmt.Errorf("action direction %d out of [0, %d)", a.Dir, NumDirections)
	case a.Size < 0 || a.Size >= NumSizes:
		return fmt.Errorf("action size %d out of [0, %d)", a.Size, NumSizes)
	case a.Exit < 0 || a.Exit >= NumExits:
		return fmt.Errorf("action exit rule %d out of [0, %d)", a.Exit, NumExits)
	}
	return nil
}

// Dataset is a bar series ready for training or evaluation: normalised
// features for every bar, the train and validation ranges and the
// instrument.
type Dataset struct {
	Bars *prices.Bars
	// Features is Bars.Len()×NumFeatures, row-major, normalised with Norm.
	// Rows before Warmup are zero (not enough history: the feature warmup,
	// and with a causal Norm its burn-in too).
	Features []float32
	Norm     Normalizer
	// ATR is the causal 14-bar average true range at each bar, in price
	// points (Wilder's smoothing); zero before it is defined. Exit rules
	// and the reward scale use it.
	ATR    []float64
	Warmup int
	Train  Range
	Valid  Range
	// Test is the held-out range after validation (empty when the config
	// has none, and in a PrepareWith dataset).
	Test       Range
	Instrument Instrument
	// Slip is the slippage of one fill at each bar's open, in price points
	// (Bars.Len() values), where the data prices it bar by bar: a fill at
	// bar t (its open, a stop inside it, a liquidation at its close) moves
	// Slip[t] against the order instead of the instrument's constant
	// slippage (Instrument.Slip); the commission is the instrument's
	// still. Nil: the constant everywhere. Prepare and PrepareWith fill it
	// with SpreadSlip (half the bid/ask spread of bars that quote one); a
	// panel fills it per series. Values must be finite and non-negative.
	Slip []float64
	// BarsPerYear annualises returns and volatility, measured from the data.
	BarsPerYear float64
	// Segments splits Train into the series of a panel (JoinPanel): an
	// episode window lies inside one segment, drawn by its weight
	// (sim.WindowStart). Nil for one series.
	Segments []Segment

	// training is the joined dataset of data.mirror (TrainingSet), nil
	// without it.
	training *Dataset
}
