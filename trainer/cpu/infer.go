package cpu

import (
	"fmt"

	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/trainer/model"
)

// checkObs checks that obs holds rows observations.
func checkObs(what string, obs []float32, rows int) error {
	if rows < 0 {
		return fmt.Errorf("%s: n = %d: must not be negative", what, rows)
	}
	if len(obs) != rows*market.ObsDim {
		return fmt.Errorf("%s: obs has %d values, want n·ObsDim = %d·%d = %d", what, len(obs), rows, market.ObsDim, rows*market.ObsDim)
	}
	return nil
}

// checkAtoms is checkObs for a call that writes every branch action and
// atom of the rows observations to dst, which must hold rows·per values;
// it returns per = NumActions·Atoms.
func (n *Net) checkAtoms(what string, obs []float32, rows int, dst []float32) (per int, err error) {
	if err := checkObs(what, obs, rows); err != nil {
		return 0, err
	}
	per = model.NumActions * n.model.Atoms
	if len(dst) != rows*per {
		return 0, fmt.Errorf("%s: dst has %d values, want n·%d·%d = %d", what, len(dst), model.NumActions, n.model.Atoms, rows*per)
	}
	return per, nil
}

// eachChunk loads the rows observations of obs into the net's input in
// chunks of at most inferRows rows and calls do after each load, with the
// chunk's first row r0 and its k rows.
func (n *Net) eachChunk(obs []float32, rows int, do func(r0, k int)) {
	for r0 := 0; r0 < rows; r0 += inferRows {
		k := min(inferRows, rows-r0)
		n.ensure(k)
		n.setInput(0, obs[r0*market.ObsDim:(r0+k)*market.ObsDim])
		do(r0, k)
	}
}

// QValues writes the expected value Q(s, a) = Σ_j p_j(s, a)·z_j of every
// branch action for the rows observations in obs (rows×ObsDim) to dst
// (rows×model.NumActions: direction 0..2, size 0..3, exit 0..2). A row's values
// do not depend on the other rows.
func (n *Net) QValues(obs []float32, rows int, dst []float32) error {
	if err := checkObs("q values", obs, rows); err != nil {
		return err
	}
	if len(dst) != rows*model.NumActions {
		return fmt.Errorf("q values: dst has %d values, want n·%d = %d", len(dst), model.NumActions, rows*model.NumActions)
	}
	n.eachChunk(obs, rows, func(r0, k int) {
		n.forward(k)
		expected(n.act.p[:k*model.NumActions*n.model.Atoms], n.support, dst[r0*model.NumActions:(r0+k)*model.NumActions])
	})
	return nil
}

// Distributions writes the probabilities p_j(s, a) of every branch action
// and atom for the rows observations in obs to dst (rows×model.NumActions×Atoms,
// actions in QValues order, atoms innermost).
func (n *Net) Distributions(obs []float32, rows int, dst []float32) error {
	per, err := n.checkAtoms("distributions", obs, rows, dst)
	if err != nil {
		return err
	}
	n.eachChunk(obs, rows, func(r0, k int) {
		n.forward(k)
		copy(dst[r0*per:(r0+k)*per], n.act.p[:k*per])
	})
	return nil
}

// Logits writes the dueling logits L_d[a, j] before the softmax (see head)
// of every branch action and atom for the rows observations in obs to dst
// (rows×NumActions×Atoms, in the layout of Distributions).
func (n *Net) Logits(obs []float32, rows int, dst []float32) error {
	per, err := n.checkAtoms("logits", obs, rows, dst)
	if err != nil {
		return err
	}
	n.eachChunk(obs, rows, func(r0, k int) {
		n.linears(k)
		n.logits(k, dst[r0*per:(r0+k)*per])
	})
	return nil
}

// Greedy writes, for each of the rows observations in obs, the greedy
// action to dst: the one that maximises Q on every branch (the first one
// on ties), flat unless the direction it picks beats flat's Q by the
// net's margin (model.Greedy, SetGreedyMargin).
func (n *Net) Greedy(obs []float32, rows int, dst []market.Action) error {
	if err := checkObs("greedy", obs, rows); err != nil {
		return err
	}
	if len(dst) != rows {
		return fmt.Errorf("greedy: dst has %d actions, want n = %d", len(dst), rows)
	}
	for r0 := 0; r0 < rows; r0 += inferRows {
		k := min(inferRows, rows-r0)
		q := n.q[:k*model.NumActions]
		if err := n.QValues(obs[r0*market.ObsDim:(r0+k)*market.ObsDim], k, q); err != nil {
			return err
		}
		for r := 0; r < k; r++ {
			dst[r0+r] = model.Greedy(q[r*model.NumActions:(r+1)*model.NumActions], n.margin)
		}
	}
	return nil
}
