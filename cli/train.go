package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/dqnflow/dqnflow/backend"
	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/trainer"
)

// runTrain implements "dqnflow train": the whole training loop in this
// process, without Temporal (the TrainingRun workflow runs the same steps as
// activities).
func runTrain(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "train")
	device := fs.String("device", "", "cpu, cuda, cuda:N or auto (default: the config's device)")
	cfgPath := fs.String("config", "", "RunConfig JSON file (default: built-in defaults)")
	dataPath := fs.String("data", "", "price CSV file, bundled:NAME or synthetic (default: the config's data.path)")
	epochs := fs.Int("epochs", 0, "number of epochs (default: the config's epochs)")
	blasFlag(fs)
	out := fs.String("out", "", "directory for checkpoints and the final report (default: runs/<run id>, a new one per run)")
	jsonOut := fs.Bool("json", false, "print the final validation report as JSON")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	cfg, err := loadConfig(fs, *cfgPath, *device, *dataPath, *epochs)
	if err != nil {
		return err
	}
	report, _, err := trainLocal(ctx, e, cfg, *out, "")
	if err != nil {
		return err
	}
	if *jsonOut {
		return printJSON(e, report)
	}
	printReport(e, report)
	return nil
}

// blasFlag adds --blas, which loadConfig applies to the config's blas.
func blasFlag(fs *flag.FlagSet) {
	fs.String("blas", "", "CPU matrix library: auto, gonum, openblas or accelerate (default: the config's blas, auto)")
}

// loadConfig reads the config file and applies the flags that override it;
// the result is validated, so a bad flag is named like a bad config key.
func loadConfig(fs *flag.FlagSet, path, device, dataPath string, epochs int) (config.RunConfig, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return cfg, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["device"] {
		cfg.Device = device
	}
	if set["data"] {
		cfg.Data.Path = dataPath
	}
	if set["epochs"] {
		cfg.Epochs = epochs
	}
	if set["blas"] {
		cfg.BLAS = fs.Lookup("blas").Value.String()
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("%w (after applying flags)", err)
	}
	return cfg, nil
}

// trainLocal trains cfg in this process as run runID (a new id when empty),
// writes checkpoints and the final validation report (report.json) under
// out (runs/<run id> when empty), and returns that report and what ran.
// Progress goes to e.stderr.
func trainLocal(ctx context.Context, e *env, cfg config.RunConfig, out, runID string) (market.Report, trainer.Info, error) {
	var report market.Report
	b, dev, err := backend.Open(cfg.Device)
	if err != nil {
		return report, trainer.Info{}, err
	}
	fmt.Fprintf(e.stderr, "device: %s\n", dev)
	ds, err := market.Prepare(cfg)
	if err != nil {
		return report, trainer.Info{}, err
	}
	fmt.Fprintf(e.stderr, "data: %s, %d bars, train %s .. %s (%d bars), validation %s .. %s (%d bars)\n",
		ds.Bars.Name, ds.Bars.Len(),
		day(ds, ds.Train.From), day(ds, ds.Train.To-1), ds.Train.Len(),
		day(ds, ds.Valid.From), day(ds, ds.Valid.To-1), ds.Valid.Len())
	tr, err := b.New(ctx, cfg, ds, nil)
	if err != nil {
		return report, trainer.Info{}, err
	}
	defer tr.Close()
	info := tr.Info()
	fmt.Fprintf(e.stderr, "trainer: %s on %s, precision %s (storage %s, compute %s), %d parameters\n",
		info.Backend, info.Device, info.Precision, info.StorageDType, info.ComputeDType, info.Parameters)
	if runID == "" {
		runID = newRunID("local")
	}
	if out == "" {
		out = filepath.Join("runs", runID)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return report, info, fmt.Errorf("create output directory: %w", err)
	}
	fmt.Fprintf(e.stderr, "run %s: checkpoints and report in %s\n", runID, out)
	for epoch := 1; epoch <= cfg.Epochs; epoch++ {
		if _, err := tr.Collect(ctx, cfg.Env.CollectSteps); err != nil {
			return report, info, fmt.Errorf("epoch %d: collect: %w", epoch, err)
		}
		bar := newProgressBar(e.stderr, fmt.Sprintf("epoch %d/%d", epoch, cfg.Epochs), cfg.StepsPerEpoch)
		st, err := tr.Train(ctx, cfg.StepsPerEpoch, func(p trainer.Progress) {
			bar.Update(p.Step, fmt.Sprintf("loss %.4f", p.Loss))
		})
		if err != nil {
			return report, info, fmt.Errorf("epoch %d: train: %w", epoch, err)
		}
		if err := tr.SyncTarget(); err != nil {
			return report, info, fmt.Errorf("epoch %d: sync target: %w", epoch, err)
		}
		last := epoch == cfg.Epochs
		if last || epoch%cfg.Checkpoint.Every == 0 {
			path, err := saveCheckpoint(tr, out, runID, epoch)
			if err != nil {
				return report, info, err
			}
			fmt.Fprintf(e.stderr, "epoch %d: checkpoint %s\n", epoch, path)
		}
		if last || epoch%cfg.Backtest.Every == 0 {
			report, err = tr.Backtest(ctx, ds, ds.Valid)
			if err != nil {
				return report, info, fmt.Errorf("epoch %d: backtest: %w", epoch, err)
			}
			fmt.Fprintf(e.stderr, "epoch %d: loss %.4f, grad norm %.3f, validation Sharpe %.3f, return %.2f%%, max drawdown %.2f%%, trades %d\n",
				epoch, st.Loss, st.GradNorm, report.Sharpe, 100*report.TotalReturn, 100*report.MaxDrawdown, report.Trades)
		}
	}
	return report, info, writeJSONFile(filepath.Join(out, "report.json"), report)
}

// saveCheckpoint snapshots tr and writes it atomically as
// DIR/epoch-NNNNNN.safetensors.
func saveCheckpoint(tr trainer.Trainer, dir, runID string, epoch int) (string, error) {
	ck, err := tr.Snapshot()
	if err != nil {
		return "", fmt.Errorf("epoch %d: snapshot: %w", epoch, err)
	}
	ck.Meta[checkpoint.MetaRunID] = runID
	ck.Meta[checkpoint.MetaEpoch] = strconv.Itoa(epoch)
	path := filepath.Join(dir, fmt.Sprintf("epoch-%06d.safetensors", epoch))
	if _, err := checkpoint.Write(path, ck); err != nil {
		return "", err
	}
	return path, nil
}

func day(ds *market.Dataset, i int) string {
	if i < 0 || i >= ds.Bars.Len() {
		return "-"
	}
	return ds.Bars.Time[i].Format("2006-01-02 15:04")
}

func printJSON(e *env, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.stdout, "%s\n", b)
	return err
}

func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}

// printReport prints a backtest report beside buy-and-hold and flat.
func printReport(e *env, r market.Report) {
	w := e.stdout
	fmt.Fprintf(w, "backtest %s .. %s (%d bars, %.0f bars/year)\n", r.From.Format("2006-01-02 15:04"), r.To.Format("2006-01-02 15:04"), r.Bars, r.BarsPerYear)
	fmt.Fprintf(w, "%-16s %12s %12s %12s\n", "", "agent", "buy & hold", "flat")
	row := func(name string, f func(m market.Metrics) string) {
		fmt.Fprintf(w, "%-16s %12s %12s %12s\n", name, f(r.Metrics), f(r.BuyAndHold), f(r.Flat))
	}
	pct := func(v float64) string { return fmt.Sprintf("%.2f%%", 100*v) }
	num := func(v float64) string { return fmt.Sprintf("%.3f", v) }
	row("total return", func(m market.Metrics) string { return pct(m.TotalReturn) })
	row("annual return", func(m market.Metrics) string { return pct(m.AnnualReturn) })
	row("volatility", func(m market.Metrics) string { return pct(m.Volatility) })
	row("Sharpe", func(m market.Metrics) string { return num(m.Sharpe) })
	row("Sortino", func(m market.Metrics) string { return num(m.Sortino) })
	row("max drawdown", func(m market.Metrics) string { return pct(m.MaxDrawdown) })
	row("Calmar", func(m market.Metrics) string { return num(m.Calmar) })
	row("CVaR 5%", func(m market.Metrics) string { return pct(m.CVaR5) })
	row("trades", func(m market.Metrics) string { return strconv.Itoa(m.Trades) })
	row("win rate", func(m market.Metrics) string { return pct(m.WinRate) })
	row("profit factor", func(m market.Metrics) string { return num(m.ProfitFactor) })
	row("turnover", func(m market.Metrics) string { return num(m.Turnover) })
	row("exposure", func(m market.Metrics) string { return pct(m.Exposure) })
}
