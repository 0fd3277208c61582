package evaluation

import (
	"fmt"

	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/report"
	"github.com/dqnflow/dqnflow/trainer/policy"
)

// ValidationBacktest backtests pol on range rng of ds (the validation
// range of data, the checkpoint at uri), recording the mean expected Q of
// the chosen actions and, with path, the equity, buy-and-hold's equity
// and the actions; notice is the run's recommendation to show beside it.
func ValidationBacktest(pol *policy.Policy, ds *market.Dataset, rng market.Range, uri, data string, path bool, notice string) (*report.Backtest, float64, error) {
	rec := &qRecorder{pol: pol, q: make([]float32, market.NumDirections+market.NumSizes+market.NumExits)}
	rep, err := sim.Backtest(ds, rng, rec)
	if err == nil {
		err = pol.Err()
	}
	if err == nil {
		err = rec.err
	}
	if err != nil {
		return nil, 0, fmt.Errorf("backtest %s on %s: %w", uri, data, err)
	}
	meanQ := rec.sumQ / float64(max(rec.n, 1))
	if !path {
		return nil, meanQ, nil
	}
	// Buy-and-hold is the report's own (sim.NewBenchmarks: 1× the
	// capital at its first fill, ADR 0036), not a second backtest.
	b := &report.Backtest{URI: uri, Equity: rep.Equity, BuyAndHold: rep.BuyAndHoldEquity, Actions: rec.actions, Report: rep, Notice: notice}
	for i := range rep.Equity {
		b.Times = append(b.Times, ds.Bars.Time[rng.From+i])
	}
	return b, meanQ, nil
}

// qRecorder is the checkpoint's greedy policy, noting each action and the
// mean over branches of the chosen action's expected Q.
type qRecorder struct {
	pol     *policy.Policy
	q       []float32
	sumQ    float64
	n       int
	actions []market.Action
	err     error
}

// Act returns the policy's action and records it.
func (r *qRecorder) Act(t int, obs []float32) market.Action {
	a := r.pol.Act(t, obs)
	if err := r.pol.QValues(obs, 1, r.q); err != nil {
		if r.err == nil {
			r.err = err
		}
	} else {
		d, s, x := r.q[:market.NumDirections], r.q[market.NumDirections:market.NumDirections+market.NumSizes], r.q[market.NumDirections+market.NumSizes:]
		r.sumQ += (float64(d[a.Dir]) + float64(s[a.Size]) + float64(x[a.Exit])) / 3
		r.n++
	}
	r.actions = append(r.actions, a)
	return a
}
