package workflows

import (
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/errtext"
)

// SweepInput is the input of Sweep. Grid maps JSON paths of the config
// ("optim.lr", "replay.alpha", "seed") to the values to try; each point of
// the grid (every combination) is Base with those values. A Base left out
// is the default config.
type SweepInput struct {
	Base config.RunConfig             `json:"base"`
	Grid map[string][]json.RawMessage `json:"grid"`
	// MaxConcurrent bounds the runs in flight, at most
	// MaxSweepConcurrent; 0 means 1.
	MaxConcurrent int `json:"max_concurrent"`
	// Lineage, if set, is the lineage of every run of the sweep.
	Lineage string `json:"lineage,omitempty"`
}

// MaxSweepConcurrent bounds SweepInput.MaxConcurrent. Every run in flight
// holds a GPU slot or waits for one, retrying its session creation; runs
// beyond the slots of the cluster only add that load and history to the
// sweep, and 64 is more slots than this project's deployments have.
const MaxSweepConcurrent = 64

// SweepPoint is one run of a sweep.
type SweepPoint struct {
	Index  int                        `json:"index"`
	RunID  string                     `json:"run_id"`
	Values map[string]json.RawMessage `json:"values"`
	Result *RunResult                 `json:"result,omitempty"`
	Error  string                     `json:"error,omitempty"`
}

// SweepResult lists every point's run and picks the best: the highest best
// validation Sharpe among the runs that completed with a backtest (the
// lower index on a tie). Best is -1 when there is none.
type SweepResult struct {
	Points          []SweepPoint `json:"points"`
	Best            int          `json:"best"`
	BestRunID       string       `json:"best_run_id,omitempty"`
	BestValidSharpe float64      `json:"best_valid_sharpe,omitempty"`
}

// Sweep runs one child TrainingRun per grid point (workflow ids
// "<sweep id>-<run>-001", ..., see childWorkflowID), at most MaxConcurrent at a time, and reports
// every result and the best run. Every point is validated before any run
// starts: an invalid one fails the sweep with a non-retryable error naming
// the point and the field. A run that fails is reported with its error; the
// sweep fails only when every run failed. Sweeps are how work spreads over
// many GPUs and hosts: each child takes a slot on whichever GPU worker is
// free.
func (w *Workflows) Sweep(ctx workflow.Context, in SweepInput) (*SweepResult, error) {
	o := w.Options.WithDefaults()
	base := in.Base
	if base == (config.RunConfig{}) {
		base = config.Defaults()
	}
	points, err := expandGrid(base, in.Grid)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError("sweep grid: "+err.Error()+"; fix the grid", activities.ErrTypeInvalidConfig, nil)
	}
	for i, p := range points {
		if err := p.cfg.Validate(); err != nil {
			return nil, invalidConfig(fmt.Sprintf("sweep point %d (%s)", i, p.desc), err)
		}
	}
	if in.MaxConcurrent < 0 || in.MaxConcurrent > MaxSweepConcurrent {
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("sweep input: max_concurrent %d outside [0, %d]; runs beyond the GPU slots only queue, so set at most the slots you have",
				in.MaxConcurrent, MaxSweepConcurrent), activities.ErrTypeInvalidConfig, nil)
	}
	limit := max(in.MaxConcurrent, 1)
	res := &SweepResult{Points: make([]SweepPoint, len(points)), Best: -1}
	sel := workflow.NewSelector(ctx)
	running, next, done := 0, 0, 0
	for done < len(points) {
		for running < limit && next < len(points) {
			i := next
			next, running = next+1, running+1
			p := &res.Points[i]
			*p = SweepPoint{Index: i, RunID: childWorkflowID(ctx, fmt.Sprintf("%03d", i+1)), Values: points[i].values}
			child := workflow.WithChildOptions(ctx, o.childOptions(p.RunID))
			f := workflow.ExecuteChildWorkflow(child, TrainingRunName, points[i].cfg, &RunState{Lineage: in.Lineage})
			sel.AddFuture(f, func(f workflow.Future) {
				running, done = running-1, done+1
				var rr RunResult
				if err := f.Get(ctx, &rr); err != nil {
					p.Error = errtext.Clean(err.Error()) // bounded: the result holds one per point
					return
				}
				p.Result = &rr
			})
		}
		sel.Select(ctx)
		if err := ctx.Err(); err != nil {
			// The children were asked to cancel with the sweep; their
			// futures settle once they have closed, and the sweep waits
			// for them.
			for running > 0 {
				sel.Select(ctx)
			}
			return nil, err
		}
	}
	var firstErr string
	for i, p := range res.Points {
		if p.Result == nil {
			if firstErr == "" {
				firstErr = fmt.Sprintf("run %s: %s", p.RunID, p.Error)
			}
			continue
		}
		if p.Result.BestEpoch > 0 && (res.Best < 0 || p.Result.BestValidSharpe > res.BestValidSharpe) {
			res.Best, res.BestRunID, res.BestValidSharpe = i, p.RunID, p.Result.BestValidSharpe
		}
	}
	if firstErr != "" && res.Best < 0 && len(points) > 0 {
		allFailed := true
		for _, p := range res.Points {
			allFailed = allFailed && p.Result == nil
		}
		if allFailed {
			return nil, temporal.NewApplicationError(fmt.Sprintf("every run of the sweep failed; first: %s", firstErr), "SweepFailed", res)
		}
	}
	return res, nil
}
