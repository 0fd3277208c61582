package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/prices"
)

// DailyReturns turns the equity curve of a backtest over bars r of b
// (equity[i] the equity at the close of bar r.From+i, equity[0] the
// initial capital) into the return on capital of each UTC calendar day
// with a bar: day d's return is the equity at the close of its last bar
// over that at the close of the last bar of the day before (the initial
// capital for the first day), minus 1. days are days since 1970-01-01.
// An equity of 0 or below (a ruined account) gives the days after it a
// return of 0, as Returns does.
func DailyReturns(b *prices.Bars, r market.Range, equity []float64) (days []int32, returns []float64, err error) {
	if len(equity) != r.Len() || r.From < 0 || r.To > b.Len() {
		return nil, nil, fmt.Errorf("daily returns: %d equity values for bars %s of %d: want one a bar", len(equity), r, b.Len())
	}
	prev := 0.0
	for i := range equity {
		d := dayOf(b.Time[r.From+i])
		if i == 0 {
			prev = equity[0]
			days, returns = append(days, d), append(returns, 0)
			continue
		}
		if d != days[len(days)-1] {
			prev = equity[i-1]
			days, returns = append(days, d), append(returns, 0)
		}
		if prev > 0 {
			returns[len(returns)-1] = equity[i]/prev - 1
		}
	}
	return days, returns, nil
}

// dayOf is t's UTC calendar day, in days since 1970-01-01.
func dayOf(t time.Time) int32 {
	return int32(math.Floor(float64(t.Unix()) / 86400))
}
