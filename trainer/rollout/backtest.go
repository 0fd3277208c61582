package rollout

import "github.com/dqnflow/dqnflow/market"

// Backtest runs the greedy policy over bars r of ds (market.Backtest), one
// observation per call of greedy. An error of greedy fails the backtest;
// every backend and the checkpoint policy (trainer/policy) backtest through
// it.
func Backtest(ds *market.Dataset, r market.Range, greedy Greedy) (market.Report, error) {
	p := &greedyPolicy{greedy: greedy}
	rep, err := market.Backtest(ds, r, p)
	if err == nil {
		err = p.err
	}
	return rep, err
}

// greedyPolicy adapts a Greedy function to market.Policy, which has no
// error result: the first error is kept and the action is flat.
type greedyPolicy struct {
	greedy Greedy
	err    error
	acts   [1]market.Action
}

// Act returns the greedy action for one observation, or flat after an
// error.
func (p *greedyPolicy) Act(_ int, obs []float32) market.Action {
	if err := p.greedy(obs, 1, p.acts[:]); err != nil {
		if p.err == nil {
			p.err = err
		}
		return market.Action{Dir: 1}
	}
	return p.acts[0]
}
