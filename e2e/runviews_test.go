package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/trainer/trainertest"
	"github.com/dqnflow/dqnflow/workflows"
)

// TestRunWatchShowCompareThroughCLI trains two small runs that differ in
// seed and learning rate on a real worker, and checks what a user sees:
// "run watch" in a log (a plain line per epoch, then the result), "run
// show" as tables and as JSON (config, device, every epoch, the best
// checkpoint marked, the backtests), and "run compare" (the config
// differences and each run's best and final metrics).
func TestRunWatchShowCompareThroughCLI(t *testing.T) {
	endToEnd(t, "the Temporal dev server and a worker")
	s := newStack(t)
	w := s.startWorker("worker")

	write := func(name string, seed uint64, lr float64) string {
		cfg := trainertest.SmallConfig()
		cfg.Epochs, cfg.StepsPerEpoch, cfg.Seed, cfg.Optim.LR = 3, 10, seed, lr
		cfg.Checkpoint.Dir = filepath.Join(s.dir, "checkpoints")
		return writeConfig(t, filepath.Join(s.dir, name+".json"), cfg)
	}
	a, b := "views-a-"+randomHex(t, 3), "views-b-"+randomHex(t, 3)
	s.dqnflow("run", "start", "--config", write("a", 1, 3e-4), "--id", a)
	s.dqnflow("run", "start", "--config", write("b", 2, 1e-3), "--id", b)

	// watch blocks until the run ends; its stdout is a pipe, not a terminal.
	watched := s.dqnflow("run", "watch", a)
	if strings.ContainsAny(watched, "\r\033") {
		t.Errorf("run watch wrote terminal control characters to a pipe:\n%q", watched)
	}
	for _, want := range []string{"epoch 1/3 done  step 10", "epoch 2/3 done", "epoch 3/3 done", "mean Q ", "ε ", "valid Sharpe", "run " + a + " completed: 3 epochs"} {
		if !strings.Contains(watched, want) {
			t.Errorf("run watch output lacks %q:\n%s", want, watched)
		}
	}
	if n := strings.Count(watched, "epoch 2/3 done"); n != 1 {
		t.Errorf("epoch 2 reported %d times, want once:\n%s", n, watched)
	}
	s.waitClosed(b, 2*time.Minute, w)

	var shown struct {
		Progress    *workflows.Progress         `json:"progress"`
		Run         metadata.Run                `json:"run"`
		Epochs      []metadata.Epoch            `json:"epochs"`
		Checkpoints []metadata.CheckpointRecord `json:"checkpoints"`
		Backtests   []metadata.BacktestRecord   `json:"backtests"`
	}
	decode(t, s.dqnflow("run", "show", a, "--json"), &shown)
	if shown.Run.Status != metadata.StatusCompleted || shown.Run.Backend != "cpu" || shown.Run.Precision == "" {
		t.Errorf("run show --json: run %+v, want completed on the cpu backend with a precision", shown.Run)
	}
	var cfg map[string]any
	if err := json.Unmarshal(shown.Run.Config, &cfg); err != nil || cfg["seed"] != 1.0 || cfg["epochs"] != 3.0 {
		t.Errorf("run show --json: config %s, want the config that ran (seed 1, 3 epochs)", shown.Run.Config)
	}
	if len(shown.Epochs) != 3 {
		t.Fatalf("run show --json: %d epochs, want 3", len(shown.Epochs))
	}
	for i, ep := range shown.Epochs {
		_, hasQ := ep.Metrics["mean_q"]
		if ep.Epoch != i+1 || ep.GlobalStep != int64(10*(i+1)) || ep.Metrics["epsilon"] <= 0 || ep.ValidSharpe == nil || !hasQ {
			t.Errorf("epoch row %d: %+v, want step %d, an ε, a mean Q and a validation Sharpe", i+1, ep, 10*(i+1))
		}
	}
	best := 0
	for _, c := range shown.Checkpoints {
		if c.IsBest {
			best++
			if shown.Run.BestEpoch == nil || c.Epoch != *shown.Run.BestEpoch {
				t.Errorf("checkpoint of epoch %d is marked best; the run's best epoch is %v", c.Epoch, shown.Run.BestEpoch)
			}
		}
	}
	if best != 1 || len(shown.Backtests) < 3 || shown.Progress == nil || shown.Progress.Epoch != 3 {
		t.Errorf("run show --json: %d best checkpoints, %d backtests, progress %+v; want 1, at least 3, epoch 3",
			best, len(shown.Backtests), shown.Progress)
	}

	text := s.dqnflow("run", "show", a)
	for _, want := range []string{"run " + a + " [completed]", "ran on: cpu backend on ", "config:", `"seed": 1`,
		"epochs (3):", "steps/s", "checkpoints (", "* = best", "backtests (", "B&H Sharpe"} {
		if !strings.Contains(text, want) {
			t.Errorf("run show lacks %q:\n%s", want, text)
		}
	}

	var cmp struct {
		Runs []struct {
			RunID           string   `json:"run_id"`
			BestValidSharpe *float64 `json:"best_valid_sharpe"`
			FinalLoss       *float64 `json:"final_loss"`
		} `json:"runs"`
		ConfigDiff map[string][]any `json:"config_diff"`
	}
	decode(t, s.dqnflow("run", "compare", a, b, "--json"), &cmp)
	if len(cmp.Runs) != 2 || cmp.Runs[0].RunID != a || cmp.Runs[1].RunID != b {
		t.Fatalf("run compare --json: runs %+v, want %s then %s", cmp.Runs, a, b)
	}
	for _, r := range cmp.Runs {
		if r.BestValidSharpe == nil || r.FinalLoss == nil {
			t.Errorf("run compare: %s lacks its best Sharpe or final loss", r.RunID)
		}
	}
	if len(cmp.ConfigDiff) != 2 || len(cmp.ConfigDiff["seed"]) != 2 || len(cmp.ConfigDiff["optim.lr"]) != 2 {
		t.Errorf("run compare: config differences %v, want exactly seed and optim.lr", cmp.ConfigDiff)
	}
	text = s.dqnflow("run", "compare", a, b)
	for _, want := range []string{"best valid Sharpe", "final loss", "config differences (2):", "optim.lr", "0.001"} {
		if !strings.Contains(text, want) {
			t.Errorf("run compare lacks %q:\n%s", want, text)
		}
	}

	// The report of run a: one page with the training and backtest plots.
	repDir := filepath.Join(s.dir, "report-a")
	if out := s.dqnflow("report", a, "--out", repDir); !strings.Contains(out, "index.html") {
		t.Errorf("report printed %q, want the page's path", out)
	}
	page, err := os.ReadFile(filepath.Join(repDir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Run " + a, "Best checkpoint (epoch", "equity.png", "drawdown.png", "actions_direction.png",
		"loss.png", "mean_q.png", "valid_sharpe.png", "epsilon.png", "grad_norm.png"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("report of %s lacks %q", a, want)
		}
	}
}

// TestSweepReportRanksItsRuns runs a sweep of two seeds and checks that
// "dqnflow report SWEEP" ranks both runs with their grid values.
func TestSweepReportRanksItsRuns(t *testing.T) {
	endToEnd(t, "the Temporal dev server and a worker")
	s := newStack(t)
	s.startWorker("worker")
	cfg := trainertest.SmallConfig()
	cfg.Epochs, cfg.StepsPerEpoch = 2, 10
	cfg.Checkpoint.Dir = filepath.Join(s.dir, "checkpoints")
	path := writeConfig(t, filepath.Join(s.dir, "base.json"), cfg)
	id := "sweep-report-" + randomHex(t, 3)
	s.dqnflow("sweep", "start", "--config", path, "--grid", "seed=1,2", "--max-concurrent", "2", "--id", id, "--wait")
	dir := filepath.Join(s.dir, "report")
	s.dqnflow("report", id, "--out", dir)
	page, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Sweep " + id, "2 runs over seed", "best: run " + id, "ranking.png", "grid_seed.png", "Effect of seed"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("sweep report lacks %q", want)
		}
	}
	if n := strings.Count(string(page), "<td>"+id+"-"); n != 2 {
		t.Errorf("sweep report lists %d runs of %s, want 2", n, id)
	}
}
