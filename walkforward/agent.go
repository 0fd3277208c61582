package walkforward

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/trainer/policy"
	"github.com/dqnflow/dqnflow/trainer/rollout"
)

// Backtester runs a trained policy greedily over bars r of a Dataset,
// with that range's benchmarks b (nil: computed). One Backtester serves
// one goroutine at a time.
type Backtester interface {
	Backtest(ds *market.Dataset, r market.Range, b *sim.Benchmarks) (sim.Report, error)
}

// GreedyPolicy is a Backtester of a greedy function (a network's:
// *policy.Policy's Greedy), through rollout's batched backtest.
type GreedyPolicy rollout.Greedy

// Backtest runs the policy over bars r of ds (rollout.BacktestStats).
func (g GreedyPolicy) Backtest(ds *market.Dataset, r market.Range, b *sim.Benchmarks) (sim.Report, error) {
	rep, _, err := rollout.BacktestStats(ds, r, rollout.Greedy(g), b)
	return rep, err
}

// PolicyBacktester is a Backtester of a bar-by-bar sim.Policy that
// keeps no state between calls (a rule, a constant).
type PolicyBacktester struct{ Policy sim.Policy }

// Backtest runs the policy over bars r of ds (sim.BacktestWith).
func (p PolicyBacktester) Backtest(ds *market.Dataset, r market.Range, b *sim.Benchmarks) (sim.Report, error) {
	return sim.BacktestWith(ds, r, p.Policy, b)
}

// Agent is what one training run of a window leaves: the checkpoint its
// validation chose, as a policy, and the evidence behind it.
type Agent struct {
	Policy Backtester
	// Clone, when not nil, makes another Backtester of the same policy,
	// so that several series are backtested at once.
	Clone func() (Backtester, error)
	// ValidSharpe and ValidT are the chosen checkpoint's validation
	// Sharpe (bar returns, annualised) and its t-statistic
	// (sim.Report.SharpeT); Abstained is set when ValidT is below
	// backtest.min_valid_t: the run recommends flat (ADR 0016).
	ValidSharpe, ValidT float64
	Abstained           bool
	Epochs, BestEpoch   int
	// Checkpoint is the file the chosen checkpoint was written to, ""
	// when none was.
	Checkpoint string
}

// TrainRequest is one training run of the study: one seed on one
// window's training series.
type TrainRequest struct {
	// Config is the run's config: the study's, with the seed, and the
	// window's data: data.path and the bar times of its ranges for one
	// series, data.series and the window's calendar dates for several.
	Config config.RunConfig
	Seed   uint64
	Window Window
	// Series names the training series and Data holds their Datasets for
	// this window (prepared from Config per series), in the same order.
	Series []string
	Data   []*market.Dataset
	// Dir, when not "", is where the run writes its chosen checkpoint,
	// with Meta added to its metadata (the window, the series, the
	// study's number of configurations tried).
	Dir  string
	Meta map[string]string
}

// Trainer trains one run of the study: one agent on every series of the
// request's Data (a panel when there are several).
type Trainer func(ctx context.Context, req TrainRequest) (Agent, error)

// LocalTrainer trains each request in this process with backend b, as
// `dqnflow train` does (cli trainLocal): every backtest.every epochs the
// online network runs on the validation range, the epoch of best
// validation Sharpe is kept (in memory: a snapshot, written to req.Dir
// at the end when that is set), training stops after backtest.patience
// backtests without a better one, and the kept checkpoint is the agent.
//
// A request of several series trains a panel: one agent on their
// training ranges joined (market.JoinPanel, data.weighting drawing the
// series), the epoch chosen on the equal-risk portfolio of the validation
// backtests of every series (sim.PanelValidation: its daily Sharpe ratio and
// t-statistic are the agent's ValidSharpe and ValidT). The checkpoint
// records the series and their ranges (checkpoint.MetaPanel) and, as its instrument,
// the first series' own (the joined set's carries the costs in its bars,
// not in the instrument; market/panel.go). Checkpoints are written with opt (the
// signing key and size bound of the checkpoint flags). Progress lines go
// to log (nil: none).
func LocalTrainer(b trainer.Backend, opt checkpoint.Options, log io.Writer) Trainer {
	if log == nil {
		log = io.Discard
	}
	return func(ctx context.Context, req TrainRequest) (Agent, error) {
		var ag Agent
		if len(req.Data) == 0 || len(req.Data) != len(req.Series) {
			return ag, fmt.Errorf("window %d, seed %d: %d datasets for the %d series %v", req.Window.Index, req.Seed, len(req.Data), len(req.Series), req.Series)
		}
		ds, cfg := req.Data[0], req.Config
		cfg.Seed = req.Seed
		panel := len(req.Data) > 1
		train := ds
		if panel {
			var err error
			if train, err = market.JoinPanel(req.Series, req.Data, cfg.Data.Weighting, cfg.Env.EpisodeBars); err != nil {
				return ag, fmt.Errorf("window %d, seed %d: %w", req.Window.Index, req.Seed, err)
			}
		}
		tr, err := b.New(ctx, cfg, train, nil)
		if err != nil {
			return ag, err
		}
		defer tr.Close()
		// validate is the chosen epoch's score: the validation Sharpe
		// ratio and its t-statistic.
		validate := func() (sharpe, t float64, err error) {
			if !panel {
				rep, err := tr.Backtest(ctx, ds, ds.Valid)
				return rep.Sharpe, rep.SharpeT(), err
			}
			sc, err := sim.PanelValidation(func(d *market.Dataset, r market.Range) (sim.Report, error) { return tr.Backtest(ctx, d, r) }, req.Series, req.Data)
			return sc.Sharpe, sc.T, err
		}
		var best *checkpoint.Checkpoint
		var bestSharpe, bestT float64
		sinceBest := 0
		for epoch := 1; epoch <= cfg.Epochs; epoch++ {
			if _, err := tr.Collect(ctx, cfg.Env.CollectSteps); err != nil {
				return ag, fmt.Errorf("epoch %d: collect: %w", epoch, err)
			}
			if _, err := tr.Train(ctx, cfg.StepsPerEpoch, nil); err != nil {
				return ag, fmt.Errorf("epoch %d: train: %w", epoch, err)
			}
			if err := tr.SyncTarget(); err != nil {
				return ag, fmt.Errorf("epoch %d: sync target: %w", epoch, err)
			}
			ag.Epochs = epoch
			if epoch != cfg.Epochs && epoch%cfg.Backtest.Every != 0 {
				continue
			}
			sharpe, t, err := validate()
			if err != nil {
				return ag, fmt.Errorf("epoch %d: validation backtest: %w", epoch, err)
			}
			if best == nil || sharpe > bestSharpe {
				if best, err = tr.Snapshot(); err != nil {
					return ag, fmt.Errorf("epoch %d: snapshot: %w", epoch, err)
				}
				best.Meta[checkpoint.MetaEpoch] = strconv.Itoa(epoch)
				bestSharpe, bestT, ag.BestEpoch, sinceBest = sharpe, t, epoch, 0
				continue
			}
			if sinceBest++; cfg.Backtest.Patience > 0 && sinceBest >= cfg.Backtest.Patience {
				break
			}
		}
		if best == nil {
			return ag, fmt.Errorf("window %d, seed %d: no validation backtest (epochs %d)", req.Window.Index, req.Seed, cfg.Epochs)
		}
		ag.ValidSharpe, ag.ValidT = bestSharpe, bestT
		ag.Abstained = cfg.Backtest.NoEdge(ag.ValidT)
		for k, v := range req.Meta {
			best.Meta[k] = v
		}
		checkpoint.SetRecommendation(best.Meta, checkpoint.NewRecommendation(ag.ValidSharpe, ag.ValidT, cfg.Backtest.MinValidT, ag.Abstained))
		if panel {
			if best.Meta[checkpoint.MetaPanel], err = market.PanelRanges(req.Series, req.Data); err != nil {
				return ag, fmt.Errorf("window %d, seed %d: %w", req.Window.Index, req.Seed, err)
			}
			inst, err := json.Marshal(ds.Instrument)
			if err != nil {
				return ag, err
			}
			best.Meta[checkpoint.MetaInstrument] = string(inst)
		}
		load := func() (Backtester, error) {
			pol, err := policy.Load(best)
			if err != nil {
				return nil, err
			}
			return GreedyPolicy(pol.Greedy), nil
		}
		if ag.Policy, err = load(); err != nil {
			return ag, err
		}
		ag.Clone = load
		if req.Dir != "" {
			if err := os.MkdirAll(req.Dir, 0o755); err != nil {
				return ag, fmt.Errorf("checkpoint directory: %w", err)
			}
			path := filepath.Join(req.Dir, fmt.Sprintf("seed-%d.safetensors", req.Seed))
			best.Meta[checkpoint.MetaRunID] = fmt.Sprintf("walkforward-w%d-%s-seed%d", req.Window.Index, strings.Join(req.Series, "+"), req.Seed)
			if _, err := checkpoint.Write(path, best, opt); err != nil {
				return ag, err
			}
			ag.Checkpoint = path
		}
		fmt.Fprintf(log, "  window %d, %v, seed %d: best epoch %d of %d, validation Sharpe %.3f (t %.2f)%s\n",
			req.Window.Index, req.Series, req.Seed, ag.BestEpoch, ag.Epochs, ag.ValidSharpe, ag.ValidT, map[bool]string{true: ", abstains (below backtest.min_valid_t)"}[ag.Abstained])
		return ag, nil
	}
}
