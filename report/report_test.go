package report

import (
	"bytes"
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/metadata"
)

func ptr[T any](v T) *T { return &v }

// sampleRun is a run of five epochs whose best checkpoint (epoch 3) has a
// backtest of 400 bars.
func sampleRun() Run {
	r := Run{Run: metadata.Run{RunID: "r1", Status: metadata.StatusCompleted, Backend: "cpu", Device: "cpu", Precision: "fp32",
		EpochsDone: 5, BestEpoch: ptr(3), BestValidSharpe: ptr(1.25), Config: json.RawMessage(`{"seed":1}`)}}
	for e := 1; e <= 5; e++ {
		r.Epochs = append(r.Epochs, metadata.Epoch{RunID: "r1", Epoch: e, EpochMetrics: metadata.EpochMetrics{
			Loss: 3 - 0.3*float64(e), GradNorm: 0.1 * float64(e), GlobalStep: int64(100 * e), DurationMS: 1000,
			ValidSharpe: ptr(float64(e) / 4), Metrics: map[string]float64{"epsilon": 1 - 0.1*float64(e)}}})
		r.Checkpoints = append(r.Checkpoints, metadata.CheckpointRecord{Epoch: e, SHA256: strings.Repeat("ab", 32), IsBest: e == 3, Pruned: e < 3})
		if e >= 3 {
			r.MeanQ = append(r.MeanQ, EpochValue{Epoch: e, Value: 0.1 * float64(e)})
		}
	}
	b := &Backtest{Epoch: 3, URI: "/ck/epoch-000003.safetensors"}
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 400 {
		b.Times = append(b.Times, t0.Add(time.Duration(i)*time.Hour))
		b.Equity = append(b.Equity, 1e5+float64(i)*10+1000*math.Sin(float64(i)/20))
		b.BuyAndHold = append(b.BuyAndHold, 1e5+float64(i)*5)
		if i < 399 {
			b.Actions = append(b.Actions, market.Action{Dir: i % 3, Size: i % 4, Exit: i % 3})
		}
	}
	b.Report = sim.Report{Metrics: sim.Metrics{Sharpe: 1.25, Trades: 17}, BuyAndHold: sim.Metrics{Sharpe: 0.5}}
	r.Best = b
	return r
}

// TestRunReportIsOnePageWithEveryPlot: index.html inlines every plot as a
// PNG data URI (the page alone is the report), and each plot is also a
// PNG file that decodes.
func TestRunReportIsOnePageWithEveryPlot(t *testing.T) {
	dir := t.TempDir()
	path, err := WriteRun(dir, sampleRun())
	if err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"loss.png", "mean_q.png", "grad_norm.png", "epsilon.png", "valid_sharpe.png", "equity.png", "drawdown.png",
		"actions_direction.png", "actions_size.png", "actions_exit.png"}
	if n := strings.Count(string(html), `src="data:image/png;base64,`); n != len(want) {
		t.Errorf("index.html inlines %d PNGs, want %d", n, len(want))
	}
	for _, name := range want {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("plot %s: %v", name, err)
			continue
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil || img.Bounds().Dx() < 600 {
			t.Errorf("plot %s does not decode as a wide PNG: %v", name, err)
		}
	}
	for _, s := range []string{"Run r1", "cpu backend on cpu, fp32", "1.250 at epoch 3", "Best checkpoint (epoch 3)", `class="mark"`, "&#34;seed&#34;: 1"} {
		if !strings.Contains(string(html), s) {
			t.Errorf("index.html lacks %q", s)
		}
	}
}

// TestActionMixSharesSumToOne: each window's shares of one branch's
// actions add up to one and match a hand count.
func TestActionMixSharesSumToOne(t *testing.T) {
	b := sampleRun().Best
	x, shares := actionMix(b, 3, func(a market.Action) int { return a.Dir })
	if len(x) != 60 {
		t.Fatalf("%d windows, want 60", len(x))
	}
	for w := range x {
		sum := shares[0][w] + shares[1][w] + shares[2][w]
		if math.Abs(sum-1) > 1e-12 {
			t.Errorf("window %d: shares sum to %g", w, sum)
		}
	}
	// Window 0 is bars 0..5 (399*1/60 = 6): directions 0,1,2,0,1,2.
	if shares[0][0] != 2.0/6 || shares[2][0] != 2.0/6 {
		t.Errorf("window 0 shares %v %v %v, want a third each", shares[0][0], shares[1][0], shares[2][0])
	}
}

// TestSweepRanksRunsAndAveragesTheGrid: ranking by best Sharpe with
// unscored runs last, and each grid value's mean over the runs at it.
func TestSweepRanksRunsAndAveragesTheGrid(t *testing.T) {
	v := func(s string) json.RawMessage { return json.RawMessage(s) }
	s := Sweep{ID: "sw", Keys: []string{"optim.lr", "seed"}, Points: []SweepPoint{
		{RunID: "a", Values: map[string]json.RawMessage{"optim.lr": v("0.001"), "seed": v("1")}, BestValidSharpe: ptr(0.5)},
		{RunID: "b", Values: map[string]json.RawMessage{"optim.lr": v("0.001"), "seed": v("2")}, BestValidSharpe: ptr(1.5)},
		{RunID: "c", Values: map[string]json.RawMessage{"optim.lr": v("0.01"), "seed": v("1")}, Error: "diverged"},
		{RunID: "d", Values: map[string]json.RawMessage{"optim.lr": v("0.01"), "seed": v("2")}, BestValidSharpe: ptr(-1.0)},
	}}
	var order []string
	for _, p := range s.Ranked() {
		order = append(order, p.RunID)
	}
	if strings.Join(order, " ") != "b a d c" {
		t.Errorf("ranking %v, want b a d c", order)
	}
	eff := s.Effects()
	lr, seed := eff[0], eff[1]
	if lr.Values[0] != "0.001" || lr.Mean[0] != 1.0 || lr.Runs[0] != 2 || lr.Mean[1] != -1.0 || lr.Runs[1] != 1 {
		t.Errorf("effect of optim.lr: %+v, want 0.001 → 1.0 over 2 runs, 0.01 → -1.0 over 1", lr)
	}
	if seed.Mean[0] != 0.5 || seed.Mean[1] != 0.25 {
		t.Errorf("effect of seed: %+v, want 1 → 0.5, 2 → 0.25", seed)
	}
	dir := t.TempDir()
	path, err := WriteSweep(dir, s)
	if err != nil {
		t.Fatal(err)
	}
	html, _ := os.ReadFile(path)
	for _, want := range []string{"Sweep sw", "best: run b, validation Sharpe 1.500", "failed: diverged", "Effect of optim.lr"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("sweep report lacks %q", want)
		}
	}
	for _, f := range []string{"ranking.png", "grid_optim_lr.png", "grid_seed.png"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}

// TestRunReportSaysWhenTheBestCheckpointsRunRecommendedFlat: the best
// checkpoint's notice (its run recommended staying flat, ADR 0016) is on
// the page; without one the page says nothing of it.
func TestRunReportSaysWhenTheBestCheckpointsRunRecommendedFlat(t *testing.T) {
	const notice = "this checkpoint's run recommended staying flat: validation t 0.84 < backtest.min_valid_t 2.00 (ADR 0016); the figures below trade it anyway"
	for _, n := range []string{notice, ""} {
		r := sampleRun()
		r.Best.Notice = n
		path, err := WriteRun(t.TempDir(), r)
		if err != nil {
			t.Fatal(err)
		}
		html, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{"recommended staying flat: validation t 0.84 &lt; backtest.min_valid_t 2.00 (ADR 0016)", "trade it anyway"} {
			if got := strings.Contains(string(html), s); got != (n != "") {
				t.Errorf("notice %q: index.html has %q: %v", n, s, got)
			}
		}
	}
}
