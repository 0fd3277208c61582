package trainertest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/model"
)

// PopulationConfigs are three members of a population derived from
// SmallConfig with the given device and precision, on a rolling window of
// the bundled bitcoin series (the synthetic series draws its bars from
// the seed, which members then could not vary: config.ValidatePopulation).
// They differ in seed, learning rate, γ, target rate, risk aversion,
// turnover penalty and exploration schedule.
func PopulationConfigs(device, precision string) []config.RunConfig {
	base := SmallConfig()
	base.Device, base.Precision = device, precision
	base.Data.Path = "bundled:bitcoin_2024.csv"
	base.Data.ValidBars, base.Data.TrainBars = 300, 1200
	a, b, c := base, base, base
	b.Seed, b.Optim.LR, b.Optim.Gamma, b.Env.EpsilonEnd = 2, 3e-4, 0.95, 0.2
	c.Seed, c.Optim.LR, c.Optim.Gamma, c.Optim.TargetTau = 3, 5e-5, 0.8, 0.25
	c.Env.RiskAversion, c.Env.TurnoverPenalty, c.Env.EpsilonDecaySteps = 0.1, 0.1, 200
	return []config.RunConfig{a, b, c}
}

// RunPopulation runs the population suite against pb, whose member k must
// compute the bits of b's single trainer for the same config:
// PopulationConfigs members against their single runs, a member made to
// go NaN against the others, and a restored population against one that
// never stopped.
func RunPopulation(t *testing.T, pb trainer.PopulationBackend, b trainer.Backend, device, precision string) {
	cfgs := PopulationConfigs(device, precision)
	ds, err := market.Prepare(context.Background(), prices.Source{}, cfgs[0])
	if err != nil {
		t.Fatalf("prepare data: %v", err)
	}
	t.Run("MemberIsBitIdenticalToSingleRun", func(t *testing.T) { testMemberIsSingle(t, pb, b, cfgs, ds) })
	t.Run("NaNStopsOnlyItsMember", func(t *testing.T) { testNaNIsolation(t, pb, b, cfgs, ds) })
	t.Run("RestoredPopulationIsBitIdentical", func(t *testing.T) { testPopulationResume(t, pb, cfgs, ds) })
	t.Run("WarmMemberIsTheSingleWarmStart", func(t *testing.T) { testPopulationWarm(t, pb, b, cfgs, ds) })
	t.Run("NewPopulationValidatesMembers", func(t *testing.T) { testPopulationValidates(t, pb, cfgs, ds) })
}

// round is one epoch of every call: Collect → Train → SyncTarget →
// Backtest on the validation range.
type round struct {
	collect  []trainer.CollectStats
	train    []trainer.TrainStats
	backtest []sim.Report
}

// populationRounds runs n rounds of p, checking that Train reports each
// live member's progress to its last step; a call's error fails the test.
func populationRounds(t *testing.T, p trainer.Population, cfg config.RunConfig, ds *market.Dataset, n int) []round {
	t.Helper()
	ctx := context.Background()
	out := make([]round, n)
	for i := range out {
		var err error
		if out[i].collect, err = p.Collect(ctx, cfg.Env.CollectSteps); err != nil {
			t.Fatalf("round %d: Collect: %v", i, err)
		}
		last := make([]trainer.Progress, p.Len())
		progress := func(k int, pr trainer.Progress) {
			if k < 0 || k >= len(last) {
				t.Fatalf("round %d: progress of member %d of %d", i, k, len(last))
			}
			last[k] = pr
		}
		if out[i].train, err = p.Train(ctx, cfg.StepsPerEpoch, progress); err != nil {
			t.Fatalf("round %d: Train: %v", i, err)
		}
		for k, st := range out[i].train {
			if st.Steps > 0 && (last[k].Step != st.Steps || last[k].GlobalStep != st.GlobalStep) {
				t.Errorf("round %d: member %d's last progress %+v, its stats %+v", i, k, last[k], st)
			}
		}
		if err = p.SyncTarget(); err != nil {
			t.Fatalf("round %d: SyncTarget: %v", i, err)
		}
		if out[i].backtest, err = p.Backtest(ctx, ds, ds.Valid); err != nil {
			t.Fatalf("round %d: Backtest: %v", i, err)
		}
	}
	return out
}

// singleRounds runs the rounds of populationRounds on one trainer.
func singleRounds(t *testing.T, tr trainer.Trainer, cfg config.RunConfig, ds *market.Dataset, n int) []round {
	t.Helper()
	ctx := context.Background()
	out := make([]round, n)
	for i := range out {
		cs, err := tr.Collect(ctx, cfg.Env.CollectSteps)
		if err != nil {
			t.Fatalf("round %d: Collect: %v", i, err)
		}
		ts, err := tr.Train(ctx, cfg.StepsPerEpoch, nil)
		if err != nil {
			t.Fatalf("round %d: Train: %v", i, err)
		}
		if err := tr.SyncTarget(); err != nil {
			t.Fatalf("round %d: SyncTarget: %v", i, err)
		}
		rep, err := tr.Backtest(ctx, ds, ds.Valid)
		if err != nil {
			t.Fatalf("round %d: Backtest: %v", i, err)
		}
		out[i] = round{[]trainer.CollectStats{cs}, []trainer.TrainStats{ts}, []sim.Report{rep}}
	}
	return out
}

// sameMember fails the test unless member k of the population rounds pop
// reported what the single trainer's rounds one did, bit for bit
// (formatted with %v, which prints a float64 exactly).
func sameMember(t *testing.T, k int, pop, one []round) {
	t.Helper()
	for i := range one {
		for what, pair := range map[string][2]any{
			"collect stats": {pop[i].collect[k], one[i].collect[0]},
			"train stats":   {statsText(pop[i].train[k]), statsText(one[i].train[0])},
			"backtest":      {pop[i].backtest[k], one[i].backtest[0]},
		} {
			if a, b := fmt.Sprintf("%+v", pair[0]), fmt.Sprintf("%+v", pair[1]); a != b {
				t.Errorf("member %d, round %d: %s differ from the single run's:\n%s\n%s", k, i, what, a, b)
			}
		}
	}
}

// statsText is TrainStats with its pointers followed.
func statsText(s trainer.TrainStats) string {
	deref := func(p *float64) string {
		if p == nil {
			return "nil"
		}
		return fmt.Sprint(*p)
	}
	q, g := deref(s.MeanQ), deref(s.Stagnation)
	s.MeanQ, s.Stagnation = nil, nil
	return fmt.Sprintf("%+v mean_q %s stagnation %s", s, q, g)
}

func newPopulation(t *testing.T, pb trainer.PopulationBackend, cfgs []config.RunConfig, ds *market.Dataset) trainer.Population {
	t.Helper()
	p, err := pb.NewPopulation(context.Background(), cfgs, ds, nil)
	if err != nil {
		t.Fatalf("NewPopulation: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func memberSnapshot(t *testing.T, p trainer.Population, k int) *checkpoint.Checkpoint {
	t.Helper()
	ck, err := p.Snapshot(k)
	if err != nil {
		t.Fatalf("Snapshot(%d): %v", k, err)
	}
	return ck
}

// testMemberIsSingle: three rounds of a population of three members
// leave each member with its single run's state, stats and reports.
func testMemberIsSingle(t *testing.T, pb trainer.PopulationBackend, b trainer.Backend, cfgs []config.RunConfig, ds *market.Dataset) {
	const n = 3
	p := newPopulation(t, pb, cfgs, ds)
	if p.Len() != len(cfgs) {
		t.Fatalf("Len() = %d, want %d", p.Len(), len(cfgs))
	}
	if info := p.Info(); info.Parameters != Parameters(cfgs[0].Model) || info.Precision != cfgs[0].Precision {
		t.Errorf("Info() = %+v, want %d parameters in %s", info, Parameters(cfgs[0].Model), cfgs[0].Precision)
	}
	pop := populationRounds(t, p, cfgs[0], ds, n)
	for k, cfg := range cfgs {
		one := newTrainer(t, b, cfg, ds, nil)
		sameMember(t, k, pop, singleRounds(t, one, cfg, ds, n))
		equalState(t, snapshot(t, one), memberSnapshot(t, p, k))
	}
	if a, c := memberSnapshot(t, p, 0), memberSnapshot(t, p, 2); bytesEqualTensor(a, c, model.TensorAdamV) {
		t.Error("members 0 and 2 hold the same Adam moments: the members are not independent")
	}
	for k, err := range p.Stopped() {
		if err != nil {
			t.Errorf("member %d stopped: %v", k, err)
		}
	}
}

func bytesEqualTensor(a, b *checkpoint.Checkpoint, name string) bool {
	ta, oka := a.Find(name)
	tb, okb := b.Find(name)
	return oka && okb && string(ta.Data) == string(tb.Data)
}

// poisonAdamM sets every element of ck's AdamW first moment to 1e38: a
// finite state, so the checkpoint restores, whose next update overflows
// the weights to ±Inf, so that the step after fails with ErrNonFinite
// (0·Inf is NaN in the first layer), on every backend.
func poisonAdamM(t *testing.T, ck *checkpoint.Checkpoint) *checkpoint.Checkpoint {
	t.Helper()
	out := &checkpoint.Checkpoint{Meta: ck.Meta, Tensors: append([]checkpoint.Tensor(nil), ck.Tensors...)}
	for i, tn := range out.Tensors {
		if tn.Name == model.TensorAdamM && tn.DType == checkpoint.F32 {
			data := make([]byte, len(tn.Data))
			v := math.Float32bits(1e38)
			for j := 0; j+4 <= len(data); j += 4 {
				data[j], data[j+1], data[j+2], data[j+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
			}
			out.Tensors[i].Data = data
			return out
		}
	}
	t.Fatalf("snapshot has no F32 tensor %s", model.TensorAdamM)
	return nil
}

// testNaNIsolation: a population restored after one round with member 1's
// Adam moment poisoned (poisonAdamM) stops member 1 in the next Train with the error
// its single trainer returns, skips it afterwards, and leaves members 0
// and 2 with their single runs' bits.
func testNaNIsolation(t *testing.T, pb trainer.PopulationBackend, b trainer.Backend, cfgs []config.RunConfig, ds *market.Dataset) {
	const bad = 1
	p := newPopulation(t, pb, cfgs, ds)
	populationRounds(t, p, cfgs[0], ds, 1)
	cks := make([]*checkpoint.Checkpoint, len(cfgs))
	for k := range cfgs {
		cks[k] = memberSnapshot(t, p, k)
	}
	cks[bad] = poisonAdamM(t, cks[bad])
	ctx := context.Background()
	q, err := pb.RestorePopulation(ctx, cks, ds)
	if err != nil {
		t.Fatalf("RestorePopulation: %v", err)
	}
	t.Cleanup(func() { q.Close() })
	pop := populationRounds(t, q, cfgs[0], ds, 2)

	stopped := q.Stopped()
	if !errors.Is(stopped[bad], trainer.ErrNonFinite) {
		t.Fatalf("member %d with an overflowing Adam moment: stop reason %v, want an error wrapping ErrNonFinite", bad, stopped[bad])
	}
	one, err := b.Restore(ctx, cks[bad], ds)
	if err != nil {
		t.Fatalf("Restore member %d alone: %v", bad, err)
	}
	defer one.Close()
	if _, err := one.Collect(ctx, cfgs[bad].Env.CollectSteps); err != nil {
		t.Fatal(err)
	}
	if _, err := one.Train(ctx, cfgs[bad].StepsPerEpoch, nil); err == nil || err.Error() != stopped[bad].Error() {
		t.Errorf("member %d stopped with %q, its single trainer returns %v", bad, stopped[bad], err)
	}
	t.Logf("member %d stopped: %v", bad, stopped[bad])
	if _, err := q.Snapshot(bad); !errors.Is(err, trainer.ErrNonFinite) {
		t.Errorf("Snapshot of the stopped member returned %v, want its stop reason", err)
	}
	for i := range pop {
		if fmt.Sprintf("%+v", pop[i].backtest[bad]) != fmt.Sprintf("%+v", sim.Report{}) || pop[i].train[bad].Steps != 0 {
			t.Errorf("round %d: the stopped member has stats %+v, report %+v; want zero values", i, pop[i].train[bad], pop[i].backtest[bad].Metrics)
		}
	}
	for k := range cfgs {
		if k == bad {
			continue
		}
		if stopped[k] != nil {
			t.Errorf("member %d stopped too: %v", k, stopped[k])
		}
		alone, err := b.Restore(ctx, cks[k], ds)
		if err != nil {
			t.Fatalf("Restore member %d alone: %v", k, err)
		}
		t.Cleanup(func() { alone.Close() })
		sameMember(t, k, pop, singleRounds(t, alone, cfgs[k], ds, 2))
		equalState(t, snapshot(t, alone), memberSnapshot(t, q, k))
	}
}

// testPopulationResume: two rounds, each member's snapshot restored as a
// population, two more rounds: the same bits as four rounds straight.
func testPopulationResume(t *testing.T, pb trainer.PopulationBackend, cfgs []config.RunConfig, ds *market.Dataset) {
	straight := newPopulation(t, pb, cfgs, ds)
	want := populationRounds(t, straight, cfgs[0], ds, 4)[2:]

	first := newPopulation(t, pb, cfgs, ds)
	populationRounds(t, first, cfgs[0], ds, 2)
	cks := make([]*checkpoint.Checkpoint, len(cfgs))
	for k := range cfgs {
		cks[k] = memberSnapshot(t, first, k)
	}
	first.Close()
	resumed, err := pb.RestorePopulation(context.Background(), cks, ds)
	if err != nil {
		t.Fatalf("RestorePopulation: %v", err)
	}
	t.Cleanup(func() { resumed.Close() })
	got := populationRounds(t, resumed, cfgs[0], ds, 2)
	for k := range cfgs {
		one := make([]round, len(want))
		for i := range want {
			one[i] = round{want[i].collect[k : k+1], want[i].train[k : k+1], want[i].backtest[k : k+1]}
		}
		sameMember(t, k, got, one)
		equalState(t, memberSnapshot(t, straight, k), memberSnapshot(t, resumed, k))
	}
}

// testPopulationWarm: a member warm-started from another run's weights
// computes what its single trainer warm-started from them does, beside
// fresh members.
func testPopulationWarm(t *testing.T, pb trainer.PopulationBackend, b trainer.Backend, cfgs []config.RunConfig, ds *market.Dataset) {
	donor := newTrainer(t, b, cfgs[0], ds, nil)
	epochs(t, donor, cfgs[0], 1)
	warm := []*checkpoint.Checkpoint{nil, snapshot(t, donor), nil}
	p, err := pb.NewPopulation(context.Background(), cfgs, ds, warm)
	if err != nil {
		t.Fatalf("NewPopulation: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	pop := populationRounds(t, p, cfgs[0], ds, 1)
	for k, cfg := range cfgs {
		one := newTrainer(t, b, cfg, ds, warm[k])
		sameMember(t, k, pop, singleRounds(t, one, cfg, ds, 1))
		equalState(t, snapshot(t, one), memberSnapshot(t, p, k))
	}
}

// testPopulationValidates: a member whose network differs is refused by
// NewPopulation with an error naming it and the field, and a warm start
// list of the wrong length is refused.
func testPopulationValidates(t *testing.T, pb trainer.PopulationBackend, cfgs []config.RunConfig, ds *market.Dataset) {
	bad := append([]config.RunConfig(nil), cfgs...)
	bad[2].Model.Head++
	ctx := context.Background()
	_, err := pb.NewPopulation(ctx, bad, ds, nil)
	var pe *config.PopulationError
	if !errors.As(err, &pe) || pe.Member != 2 || pe.Field != "model.head" || !strings.Contains(err.Error(), "member 2") {
		t.Errorf("NewPopulation with member 2's model.head changed: %v, want a *config.PopulationError naming member 2 and model.head", err)
	}
	if _, err := pb.NewPopulation(ctx, cfgs, ds, make([]*checkpoint.Checkpoint, 1)); err == nil {
		t.Error("NewPopulation with 1 warm checkpoint for 3 members succeeded")
	}
}
