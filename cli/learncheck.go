package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market"
)

// learnCheckResult is what "dqnflow learn-check --json" prints.
type learnCheckResult struct {
	Date         string           `json:"date"`
	Device       string           `json:"device"`
	Seconds      float64          `json:"seconds"`
	Config       config.RunConfig `json:"config"`
	AgentSharpe  float64          `json:"agent_sharpe"`
	OracleSharpe float64          `json:"oracle_sharpe"`
	Ratio        float64          `json:"ratio"`
	Target       float64          `json:"target_ratio"`
	Pass         bool             `json:"pass"`
	Agent        market.Report    `json:"agent"`
	Oracle       market.Report    `json:"oracle"`
}

// learnCheckConfig is the run that learn-check trains: the default model on
// the synthetic series, sized to finish within 10 minutes on 2 CPU cores.
func learnCheckConfig() config.RunConfig {
	cfg := config.Defaults()
	cfg.Data.Path = "synthetic"
	cfg.Data.SyntheticBars = 20000
	// At this learning rate the out-of-sample Sharpe peaks after 6 to 12
	// epochs and drifts down slowly after (a 40-epoch run: 16.4 at epoch
	// 7, 10.2 at epoch 35), so the check trains 12.
	cfg.Epochs = 12
	cfg.Optim.LR = 1e-4
	cfg.Env.EpsilonDecaySteps = 40000
	// The planted signal predicts one bar ahead: a short horizon learns it
	// faster than the trading default.
	cfg.Optim.Gamma = 0.9
	cfg.Replay.BetaSteps = cfg.Epochs * cfg.StepsPerEpoch
	return cfg
}

// runLearnCheck implements "dqnflow learn-check": it trains on the synthetic
// series with the planted signal and compares the agent's out-of-sample
// Sharpe with the oracle policy's on the same validation range. It fails
// (exit 1) when the agent reaches less than half the oracle's Sharpe.
func runLearnCheck(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "learn-check")
	cfgPath := fs.String("config", "", "RunConfig JSON file (default: the learn-check config)")
	jsonOut := fs.Bool("json", false, "print the result as JSON")
	blasName := fs.String("blas", "", "CPU matrix library: auto, gonum, openblas or accelerate (default: the config's, auto)")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	cfg := learnCheckConfig()
	if *cfgPath != "" {
		var err error
		if cfg, err = config.Load(*cfgPath); err != nil {
			return err
		}
	}
	if *blasName != "" {
		cfg.BLAS = *blasName
		if err := cfg.Validate(); err != nil {
			return fmt.Errorf("%w (after applying flags)", err)
		}
	}
	if cfg.Data.Path != "synthetic" {
		return fmt.Errorf("%w: learn-check needs data.path \"synthetic\", got %q", errUsage, cfg.Data.Path)
	}
	start := time.Now()
	out, err := benchOutDir("learn-check")
	if err != nil {
		return err
	}
	ds, err := market.Prepare(cfg)
	if err != nil {
		return err
	}
	_, oracle, err := market.Synthetic(cfg.Data.SyntheticBars, cfg.Seed)
	if err != nil {
		return err
	}
	oracleReport, err := market.Backtest(ds, ds.Valid, oracle)
	if err != nil {
		return fmt.Errorf("oracle backtest: %w", err)
	}
	agentReport, info, err := trainLocal(ctx, e, cfg, out, "learn-check")
	if err != nil {
		return err
	}
	res := learnCheckResult{
		Date: time.Now().UTC().Format(time.RFC3339), Device: info.Backend + " " + info.Device + " " + info.Precision, Seconds: time.Since(start).Seconds(),
		Config: cfg, AgentSharpe: agentReport.Sharpe, OracleSharpe: oracleReport.Sharpe, Target: 0.5,
		Agent: agentReport, Oracle: oracleReport,
	}
	if oracleReport.Sharpe > 0 {
		res.Ratio = agentReport.Sharpe / oracleReport.Sharpe
	}
	res.Pass = res.Ratio >= res.Target
	if err := writeJSONFile(filepath.Join(out, "learn-check.json"), res); err != nil {
		return err
	}
	if *jsonOut {
		if err := printJSON(e, res); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(e.stdout, "learn-check: agent out-of-sample Sharpe %.3f, oracle %.3f, ratio %.2f (target %.2f) in %.0f s: %s\n",
			res.AgentSharpe, res.OracleSharpe, res.Ratio, res.Target, res.Seconds, map[bool]string{true: "PASS", false: "FAIL"}[res.Pass])
	}
	if !res.Pass {
		return fmt.Errorf("agent Sharpe %.3f is below %.2f × oracle Sharpe %.3f", res.AgentSharpe, res.Target, res.OracleSharpe)
	}
	return nil
}
