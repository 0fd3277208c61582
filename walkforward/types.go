package walkforward

import "time"

// Strategy names, as Result.Strategy holds them.
const (
	StrategyAgent      = "agent"
	StrategyFlat       = "flat"
	StrategyBuyAndHold = "buy_and_hold"
	StrategyMomentum   = "tsmom"
	StrategyBestRule   = "best_rule"
)

// Window is one step of the walk-forward: train on [TrainFrom, ValidFrom),
// validate on [ValidFrom, TestFrom), test on [TestFrom, TestTo). Times are
// UTC; Index counts from 0.
type Window struct {
	Index     int       `json:"index"`
	TrainFrom time.Time `json:"train_from"`
	ValidFrom time.Time `json:"valid_from"`
	TestFrom  time.Time `json:"test_from"`
	TestTo    time.Time `json:"test_to"`
}

// Result is one strategy on one series over one window's test block.
type Result struct {
	Window   int    `json:"window"`
	Series   string `json:"series"`   // the series' name (its symbol)
	Strategy string `json:"strategy"` // Strategy*
	// Seed is the agent's seed; 0 for a baseline.
	Seed uint64 `json:"seed,omitempty"`
	// Detail says what the strategy chose, e.g. "lookback 480" for
	// momentum or the rule's name; for the agent, "abstained" when its
	// run recommended staying flat.
	Detail string `json:"detail,omitempty"`
	// Note says more where Detail must stay a fixed word: for an agent
	// that abstained, its validation t and its checkpoint's own test
	// Sharpe; for an agent tested on a series left out of its training
	// by a trainer of one series a run, which series it trained on.
	Note string `json:"note,omitempty"`
	// InTraining is false for a series left out of the agent's training
	// (leave-series-out).
	InTraining bool `json:"in_training"`
	// ValidSharpe and ValidT are, for the agent, its run's chosen
	// checkpoint's validation Sharpe (annualised, bar returns) and
	// t-statistic: the evidence ADR 0016's gate weighs, and the trials'
	// Sharpe ratios a deflated Sharpe ratio needs. 0 for a baseline.
	ValidSharpe float64 `json:"valid_sharpe,omitempty"`
	ValidT      float64 `json:"valid_t,omitempty"`

	Bars int `json:"bars"`
	// Sharpe is annualised, of the daily Returns (with DaysPerYear), its
	// block-bootstrap 95 % interval SharpeLo … SharpeHi and t-statistic
	// SharpeT (per-day Sharpe·√days) likewise: the unit every aggregate
	// (per year, portfolio) uses. BarSharpe is the backtest report's
	// Sharpe of the bar returns, what `dqnflow backtest` prints for the
	// same bars.
	Sharpe      float64 `json:"sharpe"`
	SharpeLo    float64 `json:"sharpe_lo"`
	SharpeHi    float64 `json:"sharpe_hi"`
	SharpeT     float64 `json:"sharpe_t"`
	BarSharpe   float64 `json:"bar_sharpe"`
	DaysPerYear float64 `json:"days_per_year"`
	TotalReturn float64 `json:"total_return"`
	MaxDrawdown float64 `json:"max_drawdown"`
	Turnover    float64 `json:"turnover"` // full positions traded a year
	Costs       float64 `json:"costs"`    // costs paid, share of initial capital

	// Days are the UTC calendar days of the test block on which the series
	// had a bar (days since 1970-01-01), and Returns the strategy's return
	// on capital on each: what a portfolio across series and any per-year
	// figure is computed from.
	Days    []int32   `json:"days"`
	Returns []float64 `json:"returns"`
}
