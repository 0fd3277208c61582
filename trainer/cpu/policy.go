package cpu

import (
	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/trainer"
)

// Policy is the greedy policy of a network: in each branch the action with
// the highest expected value Σ_j p_j z_j. It implements market.Policy.
type Policy struct {
	net  *Net
	err  error // the first error of Act, reported by Err
	acts [1]market.Action
}

// LoadPolicy builds the greedy policy of the online network saved in ck,
// in the precision the run used.
func LoadPolicy(ck *checkpoint.Checkpoint) (*Policy, error) {
	cfg, err := trainer.CheckpointConfig(ck)
	if err != nil {
		return nil, err
	}
	net, err := NewPolicyNet(cfg.Model, cfg.Precision, ck)
	if err != nil {
		return nil, err
	}
	return &Policy{net: net}, nil
}

// Act returns the greedy action for one observation. market.Policy has no
// error result, so a failure (a malformed observation) is kept for Err and
// the action is flat.
func (p *Policy) Act(_ int, obs []float32) market.Action {
	if err := p.net.Greedy(obs, 1, p.acts[:]); err != nil {
		if p.err == nil {
			p.err = err
		}
		return market.Action{Dir: 1}
	}
	return p.acts[0]
}

// Err returns the first error Act met, or nil.
func (p *Policy) Err() error { return p.err }

// Backtest runs the policy over bars r of ds; an error of Act fails it.
func (p *Policy) Backtest(ds *market.Dataset, r market.Range) (market.Report, error) {
	rep, err := market.Backtest(ds, r, p)
	if err == nil {
		err = p.err
	}
	return rep, err
}

// QValues writes the expected Q of every action of every branch for rows
// observations: rows × (3 + 4 + 3) values, branch by branch.
func (p *Policy) QValues(obs []float32, rows int, dst []float32) error {
	return p.net.QValues(obs, rows, dst)
}
