package bench

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/gpu"
	"github.com/dqnflow/dqnflow/internal/usage"
	"github.com/dqnflow/dqnflow/market"
	"github.com/dqnflow/dqnflow/trainer"
)

// Targets of issue 8 on one H200.
const (
	targetEpochMs             = 80   // the default epoch in bf16-mixed
	targetCollectEnvStepsPerS = 50e6 // the collector with ≥ 4096 environments, inference included
)

// EpochResult is what "dqnflow bench --epoch --json" prints.
type EpochResult struct {
	Date       string `json:"date"`
	Device     string `json:"device"`
	Backend    string `json:"backend"`
	Precision  string `json:"precision"`
	Parameters int    `json:"parameters"`
	NumEnvs    int    `json:"num_envs"`
	// Launches says how the kernels of the CUDA graphs follow each other
	// (gpu.Trainer.Launches).
	Launches string          `json:"launches"`
	Epoch    gpu.EpochTiming `json:"epoch"`
	// Collectors is the collector alone with many environments.
	Collectors                []gpu.CollectThroughput `json:"collectors"`
	TargetEpochMs             float64                 `json:"target_epoch_ms"`
	TargetCollectEnvStepsPerS float64                 `json:"target_collect_env_steps_per_s"`
}

// Epoch times the default epoch end to end on the device of b, dev
// (collect, train, sync, backtest of the validation range of ds;
// gpu.Trainer.TimeEpochs) over epochs epochs (at least 1), and the
// collector with 4096 and 16384 environments.
func Epoch(ctx context.Context, b trainer.Backend, dev string, cfg config.RunConfig, ds *market.Dataset, epochs int) (EpochResult, error) {
	tr, err := b.New(ctx, cfg, ds, nil)
	if err != nil {
		return EpochResult{}, err
	}
	defer tr.Close()
	g, ok := tr.(*gpu.Trainer)
	if !ok {
		return EpochResult{}, fmt.Errorf("%w: --epoch times the device epoch: use --device cuda (this is %s)", usage.Err, tr.Info().Backend)
	}
	info := tr.Info()
	res := EpochResult{Date: time.Now().UTC().Format(time.RFC3339), Device: dev, Backend: info.Backend, Precision: info.Precision,
		Parameters: info.Parameters, NumEnvs: cfg.Env.NumEnvs, Launches: g.Launches(), TargetEpochMs: targetEpochMs, TargetCollectEnvStepsPerS: targetCollectEnvStepsPerS}
	if res.Epoch, err = g.TimeEpochs(ctx, epochs); err != nil {
		return res, err
	}
	tr.Close()
	for _, envs := range []int{4096, 16384} {
		c := cfg
		c.Env.NumEnvs = envs
		if err := c.Validate(); err != nil {
			return res, err
		}
		tr, err := b.New(ctx, c, ds, nil)
		if err != nil {
			return res, err
		}
		ct, err := tr.(*gpu.Trainer).TimeCollect(ctx, 256)
		tr.Close()
		if err != nil {
			return res, err
		}
		res.Collectors = append(res.Collectors, ct)
	}
	return res, nil
}

// PrintEpoch writes res as lines of text.
func PrintEpoch(w io.Writer, res EpochResult) {
	ep := res.Epoch
	fmt.Fprintf(w, "%s, %s, %d parameters: epoch %.1f ms (target %d in bf16-mixed), GPU busy %.0f %%\n",
		res.Backend, res.Precision, res.Parameters, ep.EpochMs, targetEpochMs, 100*ep.BusyFraction)
	fmt.Fprintf(w, "  collect  %7.2f ms (device %7.2f)  %d env steps\n", ep.CollectMs, ep.CollectDeviceMs, ep.EnvSteps)
	fmt.Fprintf(w, "  train    %7.2f ms (device %7.2f)  %d steps at batch %d\n", ep.TrainMs, ep.TrainDeviceMs, ep.TrainSteps, ep.BatchSize)
	fmt.Fprintf(w, "  sync     %7.2f ms (device %7.2f)\n", ep.SyncMs, ep.SyncDeviceMs)
	fmt.Fprintf(w, "  backtest %7.2f ms (device %7.2f)  %d bars, %s", ep.BacktestMs, ep.BacktestDeviceMs, ep.BacktestBars, ep.BacktestMode)
	if ep.BacktestMode == "batch" {
		fmt.Fprintf(w, ": %.1f calls of the network (at most %d), %.0f observations", ep.BacktestCalls, ep.BacktestCallsMax, ep.BacktestRows)
	}
	fmt.Fprintln(w)
	for _, c := range res.Collectors {
		fmt.Fprintf(w, "  collector %5d envs: %.1f M env steps/s (device %.1f M; target %.0f M)\n",
			c.NumEnvs, c.EnvStepsPerS/1e6, c.DeviceEnvStepsPerS/1e6, targetCollectEnvStepsPerS/1e6)
	}
}
