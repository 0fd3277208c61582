package epochloop_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/epochloop"
)

// steps records the loop's calls: "T3" train, "B3" backtest, "K3"
// checkpoint (due) or "k3" (not due), "D3" done.
type steps struct {
	calls  []string
	sharpe map[int]float64
	stopAt int // Done asks to stop after this epoch; 0: never
	failAt int // Backtest fails at this epoch; 0: never
}

func (s *steps) add(f string, a ...any) { s.calls = append(s.calls, fmt.Sprintf(f, a...)) }

func (s *steps) Train(_ context.Context, e int) (epochloop.Trained, error) {
	s.add("T%d", e)
	return epochloop.Trained{Train: trainer.TrainStats{GlobalStep: int64(10 * e)}}, nil
}

func (s *steps) Backtest(_ context.Context, e int) (float64, error) {
	s.add("B%d", e)
	if e == s.failAt {
		return 0, errors.New("backtest failed")
	}
	return s.sharpe[e], nil
}

func (s *steps) Checkpoint(_ context.Context, e int, t epochloop.Trained, due bool) error {
	if t.Train.GlobalStep != int64(10*e) {
		return fmt.Errorf("epoch %d checkpointed with the training of global step %d", e, t.Train.GlobalStep)
	}
	if due {
		s.add("K%d", e)
	} else {
		s.add("k%d", e)
	}
	return nil
}

func (s *steps) Done(_ context.Context, ep epochloop.Epoch) (bool, error) {
	s.add("D%d", ep.Epoch)
	return ep.Epoch == s.stopAt, nil
}

func cfg(epochs, ckEvery, btEvery, patience int) config.RunConfig {
	c := config.Defaults()
	c.Epochs, c.Checkpoint.Every, c.Backtest.Every, c.Backtest.Patience = epochs, ckEvery, btEvery, patience
	return c
}

// TestLoopRunsTheStepsOfTheCadenceBestAndPatience works each case's
// sequence out by hand from the rules: a checkpoint and a backtest every
// N epochs and both at the last; a strictly higher validation Sharpe is a
// new best and is checkpointed; patience backtests in a row without one
// stop the loop, checkpointing that epoch only with CheckpointStop.
func TestLoopRunsTheStepsOfTheCadenceBestAndPatience(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cfg        config.RunConfig
		stop       bool
		after      int
		until      int
		sharpe     map[int]float64
		stopAt     int
		want       string
		wantLast   int
		wantBest   int
		wantEarly  bool
		wantSince  int
		startScore epochloop.Scores[string]
	}{{
		name: "cadence of 2, falling Sharpe: the first backtest stays best",
		cfg:  cfg(5, 2, 2, 0), until: 5,
		sharpe: map[int]float64{2: 0.5, 4: 0.4, 5: 0.3},
		want:   "T1 D1 T2 B2 K2 D2 T3 D3 T4 B4 K4 D4 T5 B5 K5 D5", wantLast: 5, wantBest: 2, wantSince: 2,
	}, {
		name: "a new best off the cadence is checkpointed, a tie is not a new best",
		cfg:  cfg(4, 10, 1, 0), until: 4,
		sharpe: map[int]float64{1: 0.1, 2: 0.3, 3: 0.3, 4: 0.2},
		want:   "T1 B1 k1 D1 T2 B2 k2 D2 T3 B3 D3 T4 B4 K4 D4", wantLast: 4, wantBest: 2, wantSince: 2,
	}, {
		name: "patience 2: stops at epoch 3, not checkpointed without CheckpointStop",
		cfg:  cfg(10, 5, 1, 2), until: 10,
		sharpe: map[int]float64{1: 1, 2: 0.5, 3: 0.9},
		want:   "T1 B1 k1 D1 T2 B2 D2 T3 B3 D3", wantLast: 3, wantBest: 1, wantEarly: true, wantSince: 2,
	}, {
		name: "patience 2 with CheckpointStop: epoch 3 checkpointed",
		cfg:  cfg(10, 5, 1, 2), stop: true, until: 10,
		sharpe: map[int]float64{1: 1, 2: 0.5, 3: 0.9},
		want:   "T1 B1 k1 D1 T2 B2 D2 T3 B3 k3 D3", wantLast: 3, wantBest: 1, wantEarly: true, wantSince: 2,
	}, {
		name: "a chunk goes on from the scores before it and ends at until",
		cfg:  cfg(10, 5, 1, 3), after: 3, until: 5,
		startScore: epochloop.Scores[string]{BestEpoch: 2, BestValidSharpe: 0.8, SinceBest: 1},
		sharpe:     map[int]float64{4: 0.7, 5: 0.9},
		want:       "T4 B4 D4 T5 B5 K5 D5", wantLast: 5, wantBest: 5,
	}, {
		name: "Done ends the loop",
		cfg:  cfg(10, 1, 10, 0), until: 10, stopAt: 2,
		want: "T1 K1 D1 T2 K2 D2", wantLast: 2,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s := &steps{sharpe: tc.sharpe, stopAt: tc.stopAt}
			l := &epochloop.Loop[string]{Config: tc.cfg, Scores: tc.startScore, CheckpointStop: tc.stop}
			last, err := l.Run(context.Background(), tc.after, tc.until, s)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(s.calls, " "); got != tc.want {
				t.Errorf("steps\n got %s\nwant %s", got, tc.want)
			}
			if last != tc.wantLast || l.Scores.BestEpoch != tc.wantBest || l.Early != tc.wantEarly || l.Scores.SinceBest != tc.wantSince {
				t.Errorf("last %d, best %d, early %v, since best %d; want %d, %d, %v, %d",
					last, l.Scores.BestEpoch, l.Early, l.Scores.SinceBest, tc.wantLast, tc.wantBest, tc.wantEarly, tc.wantSince)
			}
		})
	}
}

// TestLoopStopsAtAFailedStep: an error of a step ends the loop with it,
// and the epoch is neither checkpointed nor done.
func TestLoopStopsAtAFailedStep(t *testing.T) {
	s := &steps{sharpe: map[int]float64{1: 1, 2: 2}, failAt: 2}
	l := &epochloop.Loop[string]{Config: cfg(4, 1, 1, 0)}
	last, err := l.Run(context.Background(), 0, 4, s)
	if err == nil || last != 1 {
		t.Fatalf("last %d, error %v; want epoch 1 and the backtest's error", last, err)
	}
	if got, want := strings.Join(s.calls, " "), "T1 B1 K1 D1 T2 B2"; got != want {
		t.Errorf("steps %s, want %s", got, want)
	}
}
