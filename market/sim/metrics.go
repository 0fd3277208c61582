package sim

import (
	"math"
	"slices"
	"time"

	"github.com/dqnflow/dqnflow/stats"
)

// Metrics measures one equity curve. Returns are simple per-bar returns
// r_i = E_i/E_{i−1} − 1 of the equity E_0 … E_n, annualised with the
// data's own bars per year. Ratios whose denominator is zero (Sharpe and
// Sortino of a riskless curve, Calmar without drawdown, profit factor
// without a losing trade) are 0, and a value that overflows float64 is
// reported as ±math.MaxFloat64, so Metrics always encodes as JSON: read
// profit_factor 0 together with win_rate (1 means no losing trade).
type Metrics struct {
	TotalReturn  float64 `json:"total_return"`   // E_n/E_0 − 1
	AnnualReturn float64 `json:"annual_return"`  // (1 + total)^(barsPerYear/n) − 1
	Volatility   float64 `json:"volatility"`     // sample std of r × √barsPerYear
	Sharpe       float64 `json:"sharpe"`         // mean(r)/std(r) × √barsPerYear, risk-free 0
	Sortino      float64 `json:"sortino"`        // mean(r)/√mean(min(r,0)²) × √barsPerYear
	MaxDrawdown  float64 `json:"max_drawdown"`   // max_t 1 − E_t/max_{s≤t} E_s, a positive fraction
	Calmar       float64 `json:"calmar"`         // annual return / max drawdown
	CVaR5        float64 `json:"cvar_5"`         // −mean of the worst ⌈5%·n⌉ returns (positive = loss)
	Trades       int     `json:"trades"`         // closed round trips
	WinRate      float64 `json:"win_rate"`       // winning trades / trades
	ProfitFactor float64 `json:"profit_factor"`  // gross profit / gross loss of the trades
	Turnover     float64 `json:"turnover"`       // notional traded / mean equity / years
	Exposure     float64 `json:"exposure"`       // fraction of bars holding a position
	Bars         int     `json:"bars"`           // bars of the equity curve, n + 1
	FinalEquity  float64 `json:"final_equity"`   // E_n
	Costs        float64 `json:"costs"`          // money paid in slippage and commission
	CostPerTrade float64 `json:"cost_per_trade"` // Costs / Trades; 0 without trades
	// RuinBar is the bar (index in the data) at whose close equity reached
	// the margin floor and trading ended (Backtest); 0 when it never did.
	// RuinShortfall is the debt beyond zero equity at that bar, which the
	// equity curve (floored at 0) does not show.
	RuinBar       int        `json:"ruin_bar,omitempty"`
	RuinTime      *time.Time `json:"ruin_time,omitempty"`
	RuinShortfall float64    `json:"ruin_shortfall,omitempty"`
}

// Trade is one closed round trip: from the fill that opens a position (or
// the opening leg of a reversal) to the fill that brings it back to flat
// (or the closing leg of a reversal). Adds and partial exits belong to the
// same trade.
type Trade struct {
	EntryBar  int `json:"entry_bar"` // bar of the first entry fill
	ExitBar   int `json:"exit_bar"`  // bar of the last exit fill
	Dir       int `json:"dir"`       // +1 long, −1 short
	Contracts int `json:"contracts"` // largest position held, unsigned
	// EntryPrice and ExitPrice are contract-weighted average fill prices,
	// slippage included.
	EntryPrice float64 `json:"entry_price"`
	ExitPrice  float64 `json:"exit_price"`
	// PnL is the money made after commissions and slippage, the cash flow
	// of the trade's fills: Σ (−qty·price·PointValue − |qty|·Commission);
	// with one entry and one exit of c contracts that is
	// Dir·(ExitPrice − EntryPrice)·c·PointValue − 2c·Commission.
	PnL float64 `json:"pnl"`
}

// Measure computes every metric of an equity curve. equity holds E_0 … E_n
// (one value per bar, E_0 the starting capital), positions the position
// held at each of those bars, trades the closed round trips, traded the
// notional traded in money (Σ |contracts|·fill price·PointValue over all
// fills) and barsPerYear the bars per year of the data.
func Measure(equity []float64, positions []int, trades []Trade, traded, barsPerYear float64) Metrics {
	r := Returns(equity)
	total := TotalReturn(equity)
	annual := AnnualReturn(total, len(r), barsPerYear)
	dd := MaxDrawdown(equity)
	m := Metrics{
		TotalReturn:  total,
		AnnualReturn: annual,
		Volatility:   Volatility(r, barsPerYear),
		Sharpe:       Sharpe(r, barsPerYear),
		Sortino:      Sortino(r, barsPerYear),
		MaxDrawdown:  dd,
		Calmar:       Calmar(annual, dd),
		CVaR5:        CVaR(r, 0.05),
		Trades:       len(trades),
		WinRate:      WinRate(trades),
		ProfitFactor: ProfitFactor(trades),
		Turnover:     Turnover(traded, equity, barsPerYear),
		Exposure:     Exposure(positions),
		Bars:         len(equity),
	}
	if len(equity) > 0 {
		m.FinalEquity = equity[len(equity)-1]
	}
	for _, p := range []*float64{
		&m.TotalReturn, &m.AnnualReturn, &m.Volatility, &m.Sharpe, &m.Sortino, &m.MaxDrawdown, &m.Calmar,
		&m.CVaR5, &m.WinRate, &m.ProfitFactor, &m.Turnover, &m.Exposure, &m.FinalEquity,
	} {
		*p = finite(*p)
	}
	return m
}

// finite maps NaN to 0 and ±Inf to ±math.MaxFloat64.
func finite(x float64) float64 {
	switch {
	case math.IsNaN(x):
		return 0
	case math.IsInf(x, 1):
		return math.MaxFloat64
	case math.IsInf(x, -1):
		return -math.MaxFloat64
	}
	return x
}

// Returns is the simple return of each bar, r_i = E_i/E_{i−1} − 1 for
// i = 1 … n; a bar after a non-positive equity (a ruined account) has
// return 0.
func Returns(equity []float64) []float64 {
	if len(equity) < 2 {
		return nil
	}
	r := make([]float64, len(equity)-1)
	for i := 1; i < len(equity); i++ {
		if equity[i-1] > 0 {
			r[i-1] = equity[i]/equity[i-1] - 1
		}
	}
	return r
}

// TotalReturn is E_n/E_0 − 1 (0 for fewer than two values or E_0 ≤ 0).
func TotalReturn(equity []float64) float64 {
	if len(equity) < 2 || equity[0] <= 0 {
		return 0
	}
	return equity[len(equity)-1]/equity[0] - 1
}

// AnnualReturn compounds a total return over n bars to a year:
// (1 + total)^(barsPerYear/n) − 1. It is −1 when the capital is lost
// (total ≤ −1) and 0 when n or barsPerYear is not positive.
func AnnualReturn(total float64, n int, barsPerYear float64) float64 {
	if n <= 0 || !(barsPerYear > 0) {
		return 0
	}
	if total <= -1 {
		return -1
	}
	return math.Pow(1+total, barsPerYear/float64(n)) - 1
}

// Volatility is the annualised sample standard deviation of the returns,
// std(r) × √barsPerYear (stats.StdDev; 0 when barsPerYear is not
// positive, as stats.Annualise).
func Volatility(r []float64, barsPerYear float64) float64 {
	return stats.Annualise(stats.StdDev(r), barsPerYear)
}

// Sharpe is the annualised Sharpe ratio with a zero risk-free rate,
// mean(r)/std(r) × √barsPerYear (sample std); 0 when std(r) = 0. The
// definition lives in package stats (with its intervals and tests).
func Sharpe(r []float64, barsPerYear float64) float64 {
	return stats.Annualise(stats.Sharpe(r), barsPerYear)
}

// Sortino is the annualised Sortino ratio with a zero target,
// mean(r)/DD × √barsPerYear with the downside deviation
// DD = √(Σ min(r_i, 0)²/n) over all n bars; 0 when DD = 0.
func Sortino(r []float64, barsPerYear float64) float64 {
	if len(r) == 0 {
		return 0
	}
	s := 0.0
	for _, v := range r {
		if v < 0 {
			s += v * v
		}
	}
	dd := math.Sqrt(s / float64(len(r)))
	if dd == 0 {
		return 0
	}
	return stats.Annualise(stats.Mean(r)/dd, barsPerYear)
}

// MaxDrawdown is the largest fall from a running peak as a positive
// fraction of the peak, max_t (1 − E_t / max_{s≤t} E_s); 0 for a curve
// that never falls (or whose peak is not positive).
func MaxDrawdown(equity []float64) float64 {
	dd := 0.0
	peak := math.Inf(-1)
	for _, e := range equity {
		peak = max(peak, e)
		if peak > 0 {
			dd = max(dd, 1-e/peak)
		}
	}
	return dd
}

// Calmar is annual return / max drawdown; 0 without a drawdown.
func Calmar(annualReturn, maxDrawdown float64) float64 {
	if maxDrawdown <= 0 {
		return 0
	}
	return annualReturn / maxDrawdown
}

// CVaR is the conditional value at risk (expected shortfall) at level
// alpha: −mean of the worst k = ⌈alpha·n⌉ returns, positive for a loss;
// 0 for no returns. For alpha = 0.05, k = ⌈5n/100⌉ computed in integers.
func CVaR(r []float64, alpha float64) float64 {
	n := len(r)
	if n == 0 || !(alpha > 0) {
		return 0
	}
	// Round alpha to basis points and take the ceiling in integers, so that
	// 0.05·20 is exactly 1 rather than 1.0000000000000002.
	bp := int(math.Round(min(alpha, 1) * 10000))
	k := max(1, (n*bp+9999)/10000)
	worst := slices.Clone(r)
	if slices.ContainsFunc(worst, math.IsNaN) {
		slices.Sort(worst) // NaNs first, as slices.Sort orders them
	} else {
		selectSmallest(worst, k)
		slices.Sort(worst[:k])
	}
	return 0 - stats.Mean(worst[:k]) // 0 − x, not −x: no negative zero for a flat curve
}

// selectSmallest reorders x, which holds no NaN, so that x[:k] holds its
// k smallest values (in no order), in expected linear time: the worst
// returns of a backtest without sorting all of them. Sorted afterwards,
// x[:k] is what sorting x would have put there, value for value.
func selectSmallest(x []float64, k int) {
	lo, hi := 0, len(x)-1
	for lo < hi {
		// Median of three as the pivot, then Hoare's partition.
		mid := lo + (hi-lo)/2
		if x[mid] < x[lo] {
			x[mid], x[lo] = x[lo], x[mid]
		}
		if x[hi] < x[lo] {
			x[hi], x[lo] = x[lo], x[hi]
		}
		if x[hi] < x[mid] {
			x[hi], x[mid] = x[mid], x[hi]
		}
		p := x[mid]
		i, j := lo, hi
		for i <= j {
			for x[i] < p {
				i++
			}
			for p < x[j] {
				j--
			}
			if i <= j {
				x[i], x[j] = x[j], x[i]
				i++
				j--
			}
		}
		// Now x[lo..j] ≤ p ≤ x[i..hi], and x[j+1..i−1] equal p.
		switch {
		case k-1 <= j:
			hi = j
		case k-1 >= i:
			lo = i
		default:
			return
		}
	}
}

// WinRate is the fraction of trades with a positive P&L; 0 without trades.
func WinRate(trades []Trade) float64 {
	if len(trades) == 0 {
		return 0
	}
	w := 0
	for _, t := range trades {
		if t.PnL > 0 {
			w++
		}
	}
	return float64(w) / float64(len(trades))
}

// ProfitFactor is gross profit / gross loss, Σ_{PnL>0} PnL / Σ_{PnL<0} |PnL|;
// 0 when no trade lost (the ratio is undefined, and JSON has no Inf).
func ProfitFactor(trades []Trade) float64 {
	var gain, loss float64
	for _, t := range trades {
		if t.PnL > 0 {
			gain += t.PnL
		} else {
			loss -= t.PnL
		}
	}
	if loss == 0 {
		return 0
	}
	return gain / loss
}

// Turnover is the annualised turnover, traded / mean(E) / years with
// years = n / barsPerYear over the n returns of equity: a strategy that
// buys and sells its whole equity once a year has turnover 2. It is 0 when
// the mean equity or the span is not positive.
func Turnover(traded float64, equity []float64, barsPerYear float64) float64 {
	n := len(equity) - 1
	me := stats.Mean(equity)
	if n <= 0 || !(barsPerYear > 0) || !(me > 0) {
		return 0
	}
	return traded / me / (float64(n) / barsPerYear)
}

// Exposure is the fraction of bars with a non-zero position; 0 for none.
func Exposure(positions []int) float64 {
	if len(positions) == 0 {
		return 0
	}
	k := 0
	for _, p := range positions {
		if p != 0 {
			k++
		}
	}
	return float64(k) / float64(len(positions))
}
