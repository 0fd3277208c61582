package policy

import (
	"errors"

	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/trainer/model"
	"github.com/dqnflow/dqnflow/trainer/rollout"
)

// Ensemble is the greedy policy of several checkpoints deciding together
// (Vote): a position is taken only where more than half of them take it.
// Where checkpoints of one config trained at different seeds disagree, the
// vote stays flat, so a trade needs most of them behind it. It is not safe
// for concurrent use.
type Ensemble struct {
	members []*Policy
	votes   [][]market.Action // per member, the actions of the current rows
}

// NewEnsemble returns the ensemble of ps (at least one).
func NewEnsemble(ps []*Policy) (*Ensemble, error) {
	if len(ps) == 0 {
		return nil, errors.New("policy ensemble: no members")
	}
	return &Ensemble{members: ps, votes: make([][]market.Action, len(ps))}, nil
}

// Greedy writes the ensemble's action for each of the rows observations
// in obs to dst.
func (e *Ensemble) Greedy(obs []float32, rows int, dst []market.Action) error {
	for i, p := range e.members {
		if cap(e.votes[i]) < rows {
			e.votes[i] = make([]market.Action, rows)
		}
		e.votes[i] = e.votes[i][:rows]
		if err := p.Greedy(obs, rows, e.votes[i]); err != nil {
			return err
		}
	}
	for r := 0; r < rows; r++ {
		dst[r] = Vote(e.votes, r)
	}
	return nil
}

// Backtest runs the ensemble over bars r of ds (rollout.Backtest).
func (e *Ensemble) Backtest(ds *market.Dataset, r market.Range) (sim.Report, error) {
	return rollout.Backtest(ds, r, e.Greedy)
}

// Vote is the action of row r among the members' actions votes[i][r]: the
// direction more than half of them take, with the size and exit of the
// first member that takes it; flat (model.FlatDir, size and exit 0) where
// no direction has such a majority.
func Vote(votes [][]market.Action, r int) market.Action {
	var count [market.NumDirections]int
	for _, v := range votes {
		if d := v[r].Dir; d >= 0 && d < len(count) {
			count[d]++
		}
	}
	for d, c := range count {
		if 2*c > len(votes) {
			for _, v := range votes {
				if v[r].Dir == d {
					return v[r]
				}
			}
		}
	}
	return market.Action{Dir: model.FlatDir}
}
