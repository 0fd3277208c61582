package policy_test

import (
	"testing"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/trainer/model"
	"github.com/dqnflow/dqnflow/trainer/policy"
)

// TestVoteTakesOnlyAMajorityPosition: hand-worked votes of directions
// (0 short, 1 flat, 2 long): a direction more than half of the members
// take wins with its first taker's size and exit; a tie or a plurality
// short of half is flat.
func TestVoteTakesOnlyAMajorityPosition(t *testing.T) {
	a := func(dir, size, exit int) market.Action { return market.Action{Dir: dir, Size: size, Exit: exit} }
	flat := market.Action{Dir: model.FlatDir}
	for _, tc := range []struct {
		name  string
		votes []market.Action
		want  market.Action
	}{
		{"one member", []market.Action{a(2, 3, 1)}, a(2, 3, 1)},
		{"two of three long", []market.Action{a(0, 1, 0), a(2, 3, 1), a(2, 0, 2)}, a(2, 3, 1)},
		{"two of four long: no majority", []market.Action{a(2, 1, 0), a(0, 1, 0), a(2, 1, 0), a(1, 0, 0)}, flat},
		{"one each", []market.Action{a(0, 1, 0), a(1, 2, 2), a(2, 1, 0)}, flat},
		{"three of five short", []market.Action{a(0, 2, 0), a(2, 1, 0), a(0, 1, 1), a(1, 0, 0), a(0, 3, 2)}, a(0, 2, 0)},
		{"majority flat keeps its size and exit", []market.Action{a(1, 2, 1), a(1, 0, 0), a(2, 1, 0)}, a(1, 2, 1)},
	} {
		votes := make([][]market.Action, len(tc.votes))
		for i, v := range tc.votes {
			votes[i] = []market.Action{{}, v} // row 1
		}
		if got := policy.Vote(votes, 1); got != tc.want {
			t.Errorf("%s: Vote = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestEnsembleOfOneCheckpointIsThatPolicy: an ensemble of one checkpoint,
// or of three copies of it, backtests exactly as the checkpoint does, and
// an ensemble of nothing is refused.
func TestEnsembleOfOneCheckpointIsThatPolicy(t *testing.T) {
	ck, ds, _ := trained(t, config.PrecisionFP32)
	load := func() *policy.Policy {
		p, err := policy.Load(ck)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	want, err := load().Backtest(ds, ds.Valid)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 3} {
		ps := make([]*policy.Policy, n)
		for i := range ps {
			ps[i] = load()
		}
		e, err := policy.NewEnsemble(ps)
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.Backtest(ds, ds.Valid)
		if err != nil {
			t.Fatal(err)
		}
		if got.Metrics != want.Metrics {
			t.Errorf("ensemble of %d copies: %+v, want the checkpoint's %+v", n, got.Metrics, want.Metrics)
		}
	}
	if _, err := policy.NewEnsemble(nil); err == nil {
		t.Error("an ensemble of no policies was accepted")
	}
}
