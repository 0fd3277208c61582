package rollout_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/replay"
	"github.com/dqnflow/dqnflow/trainer/rollout"
)

func testConfig() config.RunConfig {
	cfg := config.Defaults()
	cfg.Data.Path, cfg.Data.SyntheticBars = prices.SyntheticPath, 3000
	cfg.Env.NumEnvs, cfg.Env.EpisodeBars, cfg.Env.EpsilonDecaySteps = 3, 40, 200
	cfg.Optim.NStep = 3
	return cfg
}

func dataset(t *testing.T, cfg config.RunConfig) *market.Dataset {
	t.Helper()
	ds, err := market.Prepare(context.Background(), prices.Source{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// sinkLog records every transition it is given.
type sinkLog struct{ ts []replay.Transition }

func (s *sinkLog) Add(t replay.Transition) error { s.ts = append(s.ts, t); return nil }

// signGreedy is a deterministic stand-in for a network: long when the
// first feature is positive, short otherwise; size and exit from the
// second and third.
func signGreedy(calls *int) rollout.Greedy {
	return func(obs []float32, rows int, dst []market.Action) error {
		*calls++
		for r := range rows {
			o := obs[r*market.ObsDim:]
			a := market.Action{Dir: 0, Size: 3, Exit: 0}
			if o[0] > 0 {
				a.Dir = 2
			}
			if o[1] > 0 {
				a.Size = 1
			}
			if o[2] > 0 {
				a.Exit = 2
			}
			dst[r] = a
		}
		return nil
	}
}

func tensorsOf(t *testing.T, c *rollout.Collector) []checkpoint.Tensor {
	t.Helper()
	ts, err := c.Tensors()
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// TestCollectorResumeIsBitIdentical: a collector restored from Tensors
// collects exactly what the original collects, and ends in the same state.
func TestCollectorResumeIsBitIdentical(t *testing.T) {
	cfg := testConfig()
	ds := dataset(t, cfg)
	ctx := context.Background()
	var calls int
	a, err := rollout.New(cfg, ds)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Collect(ctx, 50, signGreedy(&calls), &sinkLog{}); err != nil {
		t.Fatal(err)
	}
	b, err := rollout.New(cfg, ds)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Load(&checkpoint.Checkpoint{Tensors: tensorsOf(t, a)}); err != nil {
		t.Fatal(err)
	}
	var la, lb sinkLog
	sa, err := a.Collect(ctx, 120, signGreedy(&calls), &la)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := b.Collect(ctx, 120, signGreedy(&calls), &lb)
	if err != nil {
		t.Fatal(err)
	}
	if sa != sb || len(la.ts) != len(lb.ts) || len(la.ts) == 0 {
		t.Fatalf("stats %+v vs %+v, %d vs %d transitions", sa, sb, len(la.ts), len(lb.ts))
	}
	for i := range la.ts {
		if la.ts[i] != lb.ts[i] {
			t.Fatalf("transition %d: %+v vs %+v", i, la.ts[i], lb.ts[i])
		}
	}
	ta, tb := tensorsOf(t, a), tensorsOf(t, b)
	for i := range ta {
		if ta[i].Name != tb[i].Name || !bytes.Equal(ta[i].Data, tb[i].Data) {
			t.Fatalf("tensor %s differs after the same steps", ta[i].Name)
		}
	}
	if a.EnvSteps() != 170*3 || sa.EnvSteps != a.EnvSteps() || sa.Epsilon != a.Epsilon() || sa.BufferSize != 0 {
		t.Errorf("EnvSteps %d, stats %+v, Epsilon %g", a.EnvSteps(), sa, a.Epsilon())
	}
}

// TestCollectFollowsTheEpsilonSchedule: at epsilon 0 every action is the
// greedy one and n-step transitions carry the greedy actions; at epsilon 1
// the greedy policy is never asked.
func TestCollectFollowsTheEpsilonSchedule(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig()
	cfg.Env.EpsilonStart, cfg.Env.EpsilonEnd = 0, 0
	cfg.Optim.NStep = 1
	ds := dataset(t, cfg)
	c, err := rollout.New(cfg, ds)
	if err != nil {
		t.Fatal(err)
	}
	var calls int
	var log sinkLog
	if _, err := c.Collect(ctx, 30, signGreedy(&calls), &log); err != nil {
		t.Fatal(err)
	}
	if calls != 30 || len(log.ts) != 30*cfg.Env.NumEnvs {
		t.Fatalf("%d greedy calls, %d transitions", calls, len(log.ts))
	}
	obs, agent := make([]float32, market.ObsDim), make([]float32, market.NumAgentFeatures)
	for i, tr := range log.ts {
		copy(agent, tr.Agent[:])
		ds.Obs(int(tr.Bar), agent, obs)
		var want [1]market.Action
		_ = signGreedy(new(int))(obs, 1, want[:])
		if got := (market.Action{Dir: int(tr.Action[0]), Size: int(tr.Action[1]), Exit: int(tr.Action[2])}); got != want[0] {
			t.Fatalf("transition %d: action %+v, greedy %+v", i, got, want[0])
		}
	}

	cfg.Env.EpsilonStart, cfg.Env.EpsilonEnd = 1, 1
	c, err = rollout.New(cfg, ds)
	if err != nil {
		t.Fatal(err)
	}
	calls = 0
	if _, err := c.Collect(ctx, 10, signGreedy(&calls), &sinkLog{}); err != nil || calls != 0 {
		t.Fatalf("at epsilon 1: %d greedy calls, %v", calls, err)
	}
}

// TestCollectorLoadRejectsDamagedState: a damaged tensor is an error
// naming it, and the collector keeps its state.
func TestCollectorLoadRejectsDamagedState(t *testing.T) {
	cfg := testConfig()
	ds := dataset(t, cfg)
	var calls int
	src, _ := rollout.New(cfg, ds)
	if _, err := src.Collect(context.Background(), 7, signGreedy(&calls), &sinkLog{}); err != nil {
		t.Fatal(err)
	}
	good := tensorsOf(t, src)
	for _, name := range []string{rollout.TensorEnvMeta, "env.position", rollout.TensorNStepAgent, rollout.TensorNStepLen, rollout.TensorEnvSteps, rollout.TensorRNGExplore} {
		ts := make([]checkpoint.Tensor, 0, len(good))
		for _, tn := range good {
			if tn.Name == name {
				tn.Shape, tn.Data = []int{1}, tn.Data[:tn.DType.Size()]
				if name == rollout.TensorNStepLen || name == rollout.TensorEnvSteps {
					tn.Shape, tn.Data = nil, nil
				}
			}
			ts = append(ts, tn)
		}
		dst, _ := rollout.New(cfg, ds)
		before := tensorsOf(t, dst)
		err := dst.Load(&checkpoint.Checkpoint{Tensors: ts})
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("damaged %s: %v, want an error naming it", name, err)
		}
		for i, tn := range tensorsOf(t, dst) {
			if !bytes.Equal(tn.Data, before[i].Data) {
				t.Errorf("damaged %s: failed Load changed %s", name, tn.Name)
			}
		}
	}
}

// TestBacktestFailsOnAGreedyError: an error of the policy fails the
// backtest instead of trading flat silently.
func TestBacktestFailsOnAGreedyError(t *testing.T) {
	cfg := testConfig()
	ds := dataset(t, cfg)
	boom := errors.New("device lost")
	_, err := rollout.Backtest(ds, ds.Valid, func([]float32, int, []market.Action) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("Backtest: %v, want the policy's error", err)
	}
	var calls int
	rep, err := rollout.Backtest(ds, ds.Valid, signGreedy(&calls))
	if err != nil || rep.Bars != ds.Valid.Len() || calls == 0 {
		t.Fatalf("Backtest: %v, %d bars of %d, %d calls", err, rep.Bars, ds.Valid.Len(), calls)
	}
}

// TestCollectorPlaysTheMirroredCopy: with data.mirror the windows are
// drawn over the training range joined with its copy, and the transitions'
// bars index the joined set (some of them the copy's).
func TestCollectorPlaysTheMirroredCopy(t *testing.T) {
	cfg := testConfig()
	cfg.Env.NumEnvs = 16
	cfg.Data.Mirror = true
	ds := dataset(t, cfg)
	ts := ds.TrainingSet()
	if ts == ds || ts.Train.To != ds.Train.To+ds.Train.Len() {
		t.Fatalf("training set %s, want the training range %s joined with its copy", ts.Train, ds.Train)
	}
	c, err := rollout.New(cfg, ds)
	if err != nil {
		t.Fatal(err)
	}
	var calls int
	var sink sinkLog
	if _, err := c.Collect(context.Background(), 200, signGreedy(&calls), &sink); err != nil {
		t.Fatal(err)
	}
	copied := 0
	for _, tr := range sink.ts {
		for _, bar := range []int32{tr.Bar, tr.NextBar} {
			if int(bar) < ts.Train.From || int(bar) >= ts.Train.To {
				t.Fatalf("transition at bar %d (next %d) outside the joined range %s", tr.Bar, tr.NextBar, ts.Train)
			}
		}
		if int(tr.Bar) >= ds.Train.To {
			copied++
		}
	}
	if copied == 0 || copied == len(sink.ts) {
		t.Errorf("%d of %d transitions in the copy; want some, not all", copied, len(sink.ts))
	}
}
