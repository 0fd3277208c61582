package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/prices"
	"github.com/dqnflow/dqnflow/report"
	"github.com/dqnflow/dqnflow/store"
	"github.com/dqnflow/dqnflow/trainer/policy"
	"github.com/dqnflow/dqnflow/workflows"
)

// reportCmd is "dqnflow report RUN|SWEEP --out DIR [--data FILE]", or
// "dqnflow report --walkforward DIR_OR_STUDY_ID --out DIR".
func reportCmd(e *env) *cobra.Command {
	cmd := leaf("report RUN",
		"HTML report with plots of a run or a sweep",
		"report writes an HTML report with plots of a run (loss, Q, ε, Sharpe, equity, drawdown, actions) or of a sweep (its runs ranked, each grid key's effect) into a directory; "+
			"with --walkforward, of a walk-forward study (its portfolios' Sharpe ratios with intervals and DSR against each baseline, per-series and per-year tables, equity and Sharpe plots).",
		"dqnflow report lr-3e-4 --out reports/lr-3e-4 && open reports/lr-3e-4/index.html",
		"dqnflow report sweep-20261201-120000-ab12cd34 --out reports/sweep",
		"dqnflow report --walkforward runs/wf --out reports/wf")
	fs := cmd.Flags()
	e.conn.register(fs)
	out := fs.String("out", "", "directory to write index.html and the plots into (created if missing)")
	data := fs.String("data", "", "price data of the backtest plots (default: the run's data.path)")
	df := addDataFlags(fs)
	e.ckpt.register(fs)
	wf := fs.String("walkforward", "", "report a walk-forward study instead: its directory, its results.json, or its id in the metadata store (walkforward record)")
	cmd.Args = argsBetween(0, 1)
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx := cmd.Context()
		if *wf != "" || len(pos) == 0 {
			return reportWalkForward(ctx, e, cmd, *wf, *out, pos)
		}
		src, err := df.source(*data)
		if err != nil {
			return err
		}
		if err := required(fs, "out"); err != nil {
			return err
		}
		id := pos[0]
		st, err := openReader(ctx, e)
		if err != nil {
			return err
		}
		defer st.Close()
		rec, err := loadRunRecord(ctx, st, id)
		if errors.Is(err, metadata.ErrNotFound) {
			// Not a run: a sweep is a workflow whose result lists its runs.
			c, derr := dial(ctx, e)
			if derr != nil {
				return fmt.Errorf("%w; and it cannot be a sweep: %v", err, derr)
			}
			defer c.Close()
			sw, serr := loadSweep(ctx, c, st, id)
			if serr != nil {
				return fmt.Errorf("%w; as a sweep: %v", err, serr)
			}
			path, err := report.WriteSweep(*out, sw)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "wrote %s (sweep %s, %d runs)\n", path, id, len(sw.Points))
			return nil
		}
		if err != nil {
			return err
		}
		r := report.Run{Run: rec.Run, Epochs: rec.Epochs, Checkpoints: rec.Checkpoints, Backtests: rec.Backtests}
		evaluateCheckpoints(ctx, e, src, &r, rec, *data)
		path, err := report.WriteRun(*out, r)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "wrote %s (run %s, %d epochs)\n", path, id, len(rec.Epochs))
		return nil
	}
	return cmd
}

// evaluateCheckpoints backtests every checkpoint still on disk on the
// validation range: mean Q for each, and for the best one its equity,
// buy-and-hold's and the actions. A file out of reach (another host, a
// pruned blob) is a note in the report, not an error. src reads the data:
// dataFlag, else the run's data.path, which must lie in src's data roots.
func evaluateCheckpoints(ctx context.Context, e *env, src prices.Source, r *report.Run, rec runRecord, dataFlag string) {
	var cfg struct {
		Data struct {
			Path string `json:"path"`
		} `json:"data"`
	}
	json.Unmarshal(rec.Run.Config, &cfg)
	data := dataFlag
	if data == "" {
		data = cfg.Data.Path
	}
	best := rec.best()
	if best == nil {
		r.BestNote = "The run has no checkpoint with a validation score yet."
	}
	for _, c := range rec.Checkpoints {
		if c.Pruned {
			continue
		}
		if _, err := os.Stat(c.URI); err != nil {
			if c.IsBest {
				r.BestNote = fmt.Sprintf("The best checkpoint (epoch %d) is not readable here: %v. Run the report on a host that sees the checkpoint storage.", c.Epoch, err)
			}
			continue
		}
		bt, meanQ, err := evaluate(ctx, e, src, c.URI, data, c.IsBest)
		if err != nil {
			fmt.Fprintf(e.stderr, "report: checkpoint of epoch %d: %v\n", c.Epoch, err)
			if c.IsBest {
				r.BestNote = fmt.Sprintf("The best checkpoint (epoch %d) could not be backtested: %v", c.Epoch, err)
			}
			continue
		}
		r.MeanQ = append(r.MeanQ, report.EpochValue{Epoch: c.Epoch, Value: meanQ})
		if c.IsBest {
			bt.Epoch = c.Epoch
			r.Best = bt
			if bt.Notice != "" {
				fmt.Fprintf(e.stdout, "best checkpoint (epoch %d): %s\n", c.Epoch, bt.Notice)
			}
		}
	}
}

// evaluate backtests the checkpoint's greedy policy on the validation
// range of data, recording the mean expected Q of the chosen actions and,
// with path, the equity, buy-and-hold's equity and the actions.
func evaluate(ctx context.Context, e *env, src prices.Source, uri, data string, path bool) (*report.Backtest, float64, error) {
	pol, ds, rng, _, runRec, err := openPolicyData(ctx, e, src, uri, data, "validation", "", "", nil)
	if err != nil {
		return nil, 0, err
	}
	rec := &qRecorder{pol: pol, q: make([]float32, market.NumDirections+market.NumSizes+market.NumExits)}
	rep, err := sim.Backtest(ds, rng, rec)
	if err == nil {
		err = pol.Err()
	}
	if err == nil {
		err = rec.err
	}
	if err != nil {
		return nil, 0, fmt.Errorf("backtest %s on %s: %w", uri, data, err)
	}
	meanQ := rec.sumQ / float64(max(rec.n, 1))
	if !path {
		return nil, meanQ, nil
	}
	// Buy-and-hold is the report's own (sim.NewBenchmarks: 1× the
	// capital at its first fill, ADR 0036), not a second backtest.
	b := &report.Backtest{URI: uri, Equity: rep.Equity, BuyAndHold: rep.BuyAndHoldEquity, Actions: rec.actions, Report: rep, Notice: flatNotice(runRec)}
	for i := range rep.Equity {
		b.Times = append(b.Times, ds.Bars.Time[rng.From+i])
	}
	return b, meanQ, nil
}

// qRecorder is the checkpoint's greedy policy, noting each action and the
// mean over branches of the chosen action's expected Q.
type qRecorder struct {
	pol     *policy.Policy
	q       []float32
	sumQ    float64
	n       int
	actions []market.Action
	err     error
}

// Act returns the policy's action and records it.
func (r *qRecorder) Act(t int, obs []float32) market.Action {
	a := r.pol.Act(t, obs)
	if err := r.pol.QValues(obs, 1, r.q); err != nil {
		if r.err == nil {
			r.err = err
		}
	} else {
		d, s, x := r.q[:market.NumDirections], r.q[market.NumDirections:market.NumDirections+market.NumSizes], r.q[market.NumDirections+market.NumSizes:]
		r.sumQ += (float64(d[a.Dir]) + float64(s[a.Size]) + float64(x[a.Exit])) / 3
		r.n++
	}
	r.actions = append(r.actions, a)
	return a
}

// loadSweep reads a closed Sweep workflow's result and each run's final
// loss from the store.
func loadSweep(ctx context.Context, c client.Client, st store.Reader, id string) (report.Sweep, error) {
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return report.Sweep{}, fmt.Errorf("describe workflow %s: %w", id, err)
	}
	if name := desc.GetWorkflowExecutionInfo().GetType().GetName(); name != workflows.SweepName {
		return report.Sweep{}, fmt.Errorf("workflow %s is a %s, not a run the store knows nor a %s", id, name, workflows.SweepName)
	}
	var res workflows.SweepResult
	if err := c.GetWorkflow(ctx, id, "").Get(ctx, &res); err != nil {
		return report.Sweep{}, fmt.Errorf("sweep %s: %w (a report needs the sweep's result: wait until it ends)", id, err)
	}
	sw := report.Sweep{ID: id}
	keys := map[string]bool{}
	for _, p := range res.Points {
		sp := report.SweepPoint{RunID: p.RunID, Values: p.Values, Error: p.Error}
		for k := range p.Values {
			keys[k] = true
		}
		if r := p.Result; r != nil {
			sp.RunID, sp.Status, sp.Epochs, sp.BestEpoch = r.RunID, r.Status, r.Epochs, r.BestEpoch
			if r.BestEpoch > 0 {
				v := r.BestValidSharpe
				sp.BestValidSharpe = &v
			}
		}
		if eps, err := st.ListEpochs(ctx, sp.RunID); err == nil && len(eps) > 0 {
			l := eps[len(eps)-1].Loss
			sp.FinalLoss = &l
		}
		sw.Points = append(sw.Points, sp)
	}
	for k := range keys {
		sw.Keys = append(sw.Keys, k)
	}
	sort.Strings(sw.Keys)
	return sw, nil
}
