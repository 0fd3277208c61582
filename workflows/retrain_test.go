package workflows_test

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/workflow"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/workflows"
)

// TestRetrainPromotesOnlyAStrictlyBetterChallengerWithEvidence: the
// challenger must beat the champion's validation Sharpe on the same window,
// and its own must show evidence, t ≥ backtest.min_valid_t (ADR 0016). The
// validation window here is 8,767 bars of an hourly series (one year:
// t = Sharpe·√(8766/8766)), so t equals the Sharpe.
func TestRetrainPromotesOnlyAStrictlyBetterChallengerWithEvidence(t *testing.T) {
	champion := activities.CheckpointRef{RunID: "champ", URI: "/ck/champ/epoch-000009"}
	for _, tc := range []struct {
		name          string
		hasChampion   bool
		incumbent     float64
		challenger    float64
		minValidT     float64
		wantPromotion bool
	}{
		{"no champion yet", false, 0, 2.2, 2, true},
		{"no champion yet, no evidence", false, 0, 1.9, 2, false},
		{"no champion yet, evidence not asked for", false, 0, 0.2, 0, true},
		{"better", true, 2.0, 2.2, 2, true},
		{"better without evidence", true, 1.0, 1.2, 2, false},
		{"better, evidence not asked for", true, 1.0, 1.2, 0, true},
		{"equal", true, 3.0, 3.0, 2, false},
		{"worse", true, 3.0, 2.8, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newEnv(t, nil, workflows.Options{})
			var (
				childState *workflows.RunState
				childCfg   config.RunConfig
				childID    string
				evaluated  activities.EvaluateInput
				recorded   []activities.PromotionInput
			)
			env.OnActivity(ca.LookupChampion, mock.Anything, mock.Anything).Return(
				func(_ context.Context, in activities.ChampionInput) (activities.ChampionOutput, error) {
					if !tc.hasChampion {
						return activities.ChampionOutput{}, nil
					}
					return activities.ChampionOutput{Found: true, RunID: "champ", Checkpoint: champion}, nil
				})
			env.OnWorkflow(workflows.TrainingRunName, mock.Anything, mock.Anything, mock.Anything).Return(
				func(ctx workflow.Context, cfg config.RunConfig, st *workflows.RunState) (*workflows.RunResult, error) {
					childState, childCfg, childID = st, cfg, workflow.GetInfo(ctx).WorkflowExecution.ID
					best := ckRef(3)
					return &workflows.RunResult{RunID: childID, BestEpoch: 3, BestCheckpoint: &best, LastCheckpoint: &best}, nil
				})
			env.OnActivity(ta.EvaluateCheckpoints, mock.Anything, mock.Anything).Return(
				func(_ context.Context, in activities.EvaluateInput) (activities.EvaluateOutput, error) {
					evaluated = in
					var out activities.EvaluateOutput
					for i := range in.Checkpoints {
						rep := sim.Report{BarsPerYear: 8766}
						rep.Bars, rep.Sharpe = 8767, []float64{tc.challenger, tc.incumbent}[i]
						out.Reports = append(out.Reports, rep)
					}
					return out, nil
				})
			env.OnActivity(ca.RecordPromotion, mock.Anything, mock.Anything).Return(
				func(_ context.Context, in activities.PromotionInput) (activities.PromotionOutput, error) {
					recorded = append(recorded, in)
					return activities.PromotionOutput{Promoted: in.Promoted, Reason: in.Reason}, nil
				})
			cfg := config.Defaults()
			cfg.Data.TrainFrom, cfg.Data.ValidFrom = "2024-01-01", "2024-06-01"
			cfg.Backtest.MinValidT = tc.minValidT
			env.ExecuteWorkflow(workflows.RetrainName, workflows.RetrainInput{Lineage: "spx", Config: cfg})
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			var res workflows.RetrainResult
			if err := env.GetWorkflowResult(&res); err != nil {
				t.Fatal(err)
			}

			if childCfg != cfg || childState == nil || childState.Lineage != "spx" || !strings.HasPrefix(childID, "default-test-workflow-id-") || !strings.HasSuffix(childID, "-challenger") || childID == "default-test-workflow-id-challenger" {
				t.Fatalf("challenger run %s got config window %v and state %+v, want the new window in lineage spx", childID, childCfg.Data, childState)
			}
			if tc.hasChampion && (childState.Warm == nil || *childState.Warm != champion || childState.ParentRunID != "champ") {
				t.Errorf("challenger warm start %+v (parent %q), want the champion's checkpoint", childState.Warm, childState.ParentRunID)
			}
			if !tc.hasChampion && childState.Warm != nil {
				t.Errorf("challenger warm-started from %+v although the lineage has no champion", childState.Warm)
			}
			wantEval := 1
			if tc.hasChampion {
				wantEval = 2
			}
			if evaluated.Config != cfg || len(evaluated.Checkpoints) != wantEval || evaluated.Checkpoints[0] != ckRef(3) {
				t.Errorf("evaluated %+v, want the challenger's best checkpoint (and the champion's) on the new window", evaluated.Checkpoints)
			}
			if len(recorded) != 1 || recorded[0].Promoted != tc.wantPromotion || recorded[0].RetrainID != "default-test-workflow-id/default-test-run-id" ||
				*recorded[0].ChallengerScore != tc.challenger || (recorded[0].Incumbent != nil) != tc.hasChampion {
				t.Fatalf("recorded %+v, want one decision promoted=%v", recorded, tc.wantPromotion)
			}
			if res.Promoted != tc.wantPromotion || res.ChallengerSharpe != tc.challenger || res.Reason == "" {
				t.Errorf("result %+v, want promoted=%v with a reason", res, tc.wantPromotion)
			}
			if math.Abs(res.ChallengerSharpeT-tc.challenger) > 1e-12 {
				t.Errorf("challenger t = %v, want %v (one year of bars)", res.ChallengerSharpeT, tc.challenger)
			}
			if noEdge := strings.Contains(res.Reason, "no edge"); noEdge != (tc.minValidT > 0 && tc.challenger < tc.minValidT) {
				t.Errorf("reason %q: says no edge = %v, want %v", res.Reason, noEdge, !noEdge)
			}
		})
	}
}
