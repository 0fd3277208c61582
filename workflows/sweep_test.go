package workflows_test

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/workflows"
)

func raw(vs ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(vs))
	for i, v := range vs {
		out[i] = json.RawMessage(v)
	}
	return out
}

func TestSweepRunsTheGridWithBoundedConcurrencyAndPicksTheBest(t *testing.T) {
	env := newEnv(t, nil, workflows.Options{})
	var (
		mu               sync.Mutex
		inFlight, most   int
		seen             []config.RunConfig
		lineages, runIDs []string
	)
	// A child's score is lr·1000 + seed: the best point is lr 1e-3, seed 2.
	env.OnWorkflow(workflows.TrainingRunName, mock.Anything, mock.Anything, mock.Anything).Return(
		func(ctx workflow.Context, cfg config.RunConfig, st *workflows.RunState) (*workflows.RunResult, error) {
			mu.Lock()
			inFlight++
			most = max(most, inFlight)
			seen = append(seen, cfg)
			lineages = append(lineages, st.Lineage)
			runIDs = append(runIDs, workflow.GetInfo(ctx).WorkflowExecution.ID)
			mu.Unlock()
			if err := workflow.Sleep(ctx, time.Minute); err != nil {
				return nil, err
			}
			mu.Lock()
			inFlight--
			mu.Unlock()
			if cfg.Seed == 3 {
				return nil, errors.New("child crashed")
			}
			return &workflows.RunResult{BestEpoch: 1, BestValidSharpe: cfg.Optim.LR*1000 + float64(cfg.Seed)}, nil
		})
	base := config.Defaults()
	base.Epochs = 7
	env.ExecuteWorkflow(workflows.SweepName, workflows.SweepInput{
		Base:          base,
		Grid:          map[string][]json.RawMessage{"seed": raw("1", "2", "3"), "optim.lr": raw("0.0001", "0.001")},
		MaxConcurrent: 2,
		Lineage:       "sweep-lineage",
	})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res workflows.SweepResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if most != 2 {
		t.Errorf("at most %d runs in flight, want 2", most)
	}
	if len(res.Points) != 6 || len(seen) != 6 {
		t.Fatalf("%d points, %d runs, want 6", len(res.Points), len(seen))
	}
	// Keys sorted (optim.lr, seed), the last varying fastest.
	wantValues := []string{"0.0001 1", "0.0001 2", "0.0001 3", "0.001 1", "0.001 2", "0.001 3"}
	for i, p := range res.Points {
		got := string(p.Values["optim.lr"]) + " " + string(p.Values["seed"])
		if got != wantValues[i] || p.Index != i || !strings.HasSuffix(p.RunID, []string{"-001", "-002", "-003", "-004", "-005", "-006"}[i]) {
			t.Errorf("point %d = %s (%s), want %s", i, got, p.RunID, wantValues[i])
		}
		if (p.Error != "") != strings.HasSuffix(got, " 3") {
			t.Errorf("point %d error %q, want an error exactly for seed 3", i, p.Error)
		}
	}
	for i, c := range seen {
		if c.Epochs != 7 || lineages[i] != "sweep-lineage" {
			t.Errorf("run %s got epochs %d lineage %q, want the base's 7 and the sweep's lineage", runIDs[i], c.Epochs, lineages[i])
		}
	}
	if res.Best != 4 || res.BestValidSharpe != 3 || res.BestRunID != res.Points[4].RunID {
		t.Errorf("best = point %d (%s, %g), want point 4 (lr 0.001, seed 2, Sharpe 3)", res.Best, res.BestRunID, res.BestValidSharpe)
	}
}

func TestSweepValidatesEveryPointBeforeStartingAny(t *testing.T) {
	seeds := map[string][]json.RawMessage{"seed": raw("1", "2")}
	for _, tc := range []struct {
		name string
		grid map[string][]json.RawMessage
		conc int
		want []string
	}{
		{"out of range", map[string][]json.RawMessage{"optim.lr": raw("0.001", "5")}, 4, []string{"sweep point 1", "optim.lr=5", "optim.lr"}},
		{"unknown key", map[string][]json.RawMessage{"optim.lrr": raw("0.001")}, 4, []string{"sweep point 0", "lrr"}},
		{"not a section", map[string][]json.RawMessage{"seed.x": raw("1")}, 4, []string{"seed.x", `"seed" is not a config section`}},
		{"no values", map[string][]json.RawMessage{"seed": {}}, 4, []string{`grid key "seed" has no values`}},
		{"negative concurrency", seeds, -1, []string{"max_concurrent", "-1", "[0, 64]"}},
		{"unbounded concurrency", seeds, 10000, []string{"max_concurrent", "10000", "[0, 64]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newEnv(t, nil, workflows.Options{})
			started := 0
			env.OnWorkflow(workflows.TrainingRunName, mock.Anything, mock.Anything, mock.Anything).Return(
				func(ctx workflow.Context, cfg config.RunConfig, st *workflows.RunState) (*workflows.RunResult, error) {
					started++
					return &workflows.RunResult{}, nil
				})
			env.ExecuteWorkflow(workflows.SweepName, workflows.SweepInput{Grid: tc.grid, MaxConcurrent: tc.conc})
			err := env.GetWorkflowError()
			var ae *temporal.ApplicationError
			if !errors.As(err, &ae) || ae.Type() != activities.ErrTypeInvalidConfig || !ae.NonRetryable() {
				t.Fatalf("error %v, want a non-retryable %s", err, activities.ErrTypeInvalidConfig)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
			if started != 0 {
				t.Errorf("%d runs started before the grid was validated", started)
			}
		})
	}
}
