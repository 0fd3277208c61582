package runview

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/workflows"
)

// watchSamples feeds a watcher the samples of a two-epoch run: training
// in epoch 1, epoch 1 done while epoch 2 trains, then the run completed.
func watchSamples(w *watcher) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	p := workflows.Progress{RunID: "r", Status: metadata.StatusRunning, Phase: "training", Epochs: 2}
	w.update(t0, p, &activities.Heartbeat{Epoch: 1, Stage: "train", Step: 10, Steps: 100, GlobalStep: 10, Loss: 2.5})
	w.update(t0.Add(time.Second), p, &activities.Heartbeat{Epoch: 1, Stage: "train", Step: 50, Steps: 100, GlobalStep: 50, Loss: 2.0})
	p.Epoch, p.Step, p.Loss, p.BestEpoch, p.BestValidSharpe, p.LastValidSharpe = 1, 100, 1.5, 1, 0.7, 0.7
	w.update(t0.Add(3*time.Second), p, &activities.Heartbeat{Epoch: 2, Stage: "train", Step: 20, Steps: 100, GlobalStep: 120, Loss: 1.4})
	p.Epoch, p.Status, p.Phase = 2, metadata.StatusCompleted, "done"
	w.update(t0.Add(6*time.Second), p, nil)
	w.finish()
}

func storedEpochs(string) []metadata.Epoch {
	v := 0.7
	return []metadata.Epoch{
		{Epoch: 1, EpochMetrics: metadata.EpochMetrics{Loss: 1.5, GradNorm: 0.25, GlobalStep: 100, DurationMS: 2000, ValidSharpe: &v,
			Metrics: map[string]float64{"epsilon": 0.5, "mean_q": 0.125}}},
		{Epoch: 2, EpochMetrics: metadata.EpochMetrics{Loss: 1.25, GradNorm: 0.2, GlobalStep: 200, DurationMS: 4000,
			Metrics: map[string]float64{"epsilon": 0.25}}},
	}
}

// TestWatchOnATerminalRedrawsOneLineInPlace: on a terminal the epoch in
// training is one line rewritten with carriage return and erase-line, with
// steps/s from two heartbeats; finished epochs are lines of their own.
func TestWatchOnATerminalRedrawsOneLineInPlace(t *testing.T) {
	var out bytes.Buffer
	w := &watcher{w: &out, tty: true, epochs: storedEpochs, epsilon: math.NaN(), meanQ: math.NaN()}
	watchSamples(w)
	s := out.String()
	if n := strings.Count(s, "\r\033[K"); n < 4 {
		t.Errorf("%d in-place redraws, want at least 4:\n%q", n, s)
	}
	if !strings.Contains(s, "epoch 1/2 [============>           ] train 50/100  40.0 steps/s  loss 2.0000") {
		t.Errorf("no live line at step 50 with 40 steps/s (40 steps in 1 s):\n%q", s)
	}
	if !strings.Contains(s, "loss 1.4000  mean Q 0.1250  ε 0.500") {
		t.Errorf("the live line of epoch 2 lacks mean Q and ε of epoch 1:\n%q", s)
	}
	for _, want := range []string{
		"epoch 1/2 done  step 100  50.0 steps/s  loss 1.5000  grad norm 0.250  mean Q 0.1250  ε 0.500  valid Sharpe 0.700  best 0.700 @1  2s\n",
		"epoch 2/2 done  step 200  25.0 steps/s  loss 1.2500  grad norm 0.200  ε 0.250",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%q", want, s)
		}
	}
}

// TestWatchInALogPrintsPlainLines: without a terminal there are no control
// characters and no live lines, only a line per epoch and per state.
func TestWatchInALogPrintsPlainLines(t *testing.T) {
	var out bytes.Buffer
	w := &watcher{w: &out, tty: false, epochs: storedEpochs, epsilon: math.NaN(), meanQ: math.NaN()}
	watchSamples(w)
	s := out.String()
	if strings.ContainsAny(s, "\r\033") {
		t.Errorf("control characters in a log:\n%q", s)
	}
	lines := strings.Split(strings.TrimSpace(s), "\n")
	want := []string{"run r [running] training, epoch 1 of 2", "epoch 1/2 done", "epoch 2/2 done"}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), s)
	}
	for i := range want {
		if !strings.HasPrefix(lines[i], want[i]) {
			t.Errorf("line %d = %q, want it to begin %q", i+1, lines[i], want[i])
		}
	}
}
