package workflows

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/config"
)

// RetrainInput is the input of Retrain: the lineage to retrain and the
// config of the challenger run, whose data section is the newer window
// (the UI or a Schedule sends it as one JSON object; a config left out is
// the default one).
type RetrainInput struct {
	Lineage string           `json:"lineage"`
	Config  config.RunConfig `json:"config"`
}

// RetrainResult is Retrain's decision and the runs behind it. Both scores
// are validation Sharpe ratios on the challenger config's validation window.
type RetrainResult struct {
	Lineage              string                   `json:"lineage"`
	Challenger           RunResult                `json:"challenger"`
	ChallengerCheckpoint activities.CheckpointRef `json:"challenger_checkpoint"`
	ChallengerSharpe     float64                  `json:"challenger_sharpe"`
	// ChallengerSharpeT is the t-statistic of ChallengerSharpe
	// (sim.Report.SharpeT), the evidence a promotion needs.
	ChallengerSharpeT   float64                   `json:"challenger_sharpe_t"`
	IncumbentRunID      string                    `json:"incumbent_run_id,omitempty"`
	IncumbentCheckpoint *activities.CheckpointRef `json:"incumbent_checkpoint,omitempty"`
	IncumbentSharpe     *float64                  `json:"incumbent_sharpe,omitempty"`
	Promoted            bool                      `json:"promoted"`
	Reason              string                    `json:"reason"`
}

// Retrain trains a challenger for a lineage and promotes it only if it beats
// the incumbent. It looks up the lineage's champion, runs a child
// TrainingRun (workflow id "<retrain id>-<run>-challenger", see
// childWorkflowID) warm-started from the
// champion's checkpoint (fresh when the lineage has none), backtests the
// challenger's best checkpoint and the champion's on the same validation
// window, and promotes the challenger when its validation Sharpe is
// strictly higher (or the lineage had no champion) and shows evidence: its t-statistic is at least the
// config's backtest.min_valid_t (ADR 0016; 0 turns the test off), the
// rule a local run abstains by. The decision is
// recorded once per Retrain execution (workflow id and run id), so a
// retried activity cannot record two. Schedules start it.
func (w *Workflows) Retrain(ctx workflow.Context, in RetrainInput) (*RetrainResult, error) {
	o := w.Options.WithDefaults()
	cfg := in.Config
	if cfg == (config.RunConfig{}) {
		cfg = config.Defaults()
	}
	if in.Lineage == "" {
		return nil, temporal.NewNonRetryableApplicationError(
			"retrain input: lineage is empty; name the lineage to retrain", activities.ErrTypeInvalidConfig, nil)
	}
	if err := cfg.Validate(); err != nil {
		return nil, invalidConfig("retrain config", err)
	}
	id := workflow.GetInfo(ctx).WorkflowExecution.ID
	cctx := o.controlCtx(ctx)

	var champ activities.ChampionOutput
	if err := workflow.ExecuteActivity(cctx, ca.LookupChampion, activities.ChampionInput{Lineage: in.Lineage}).Get(ctx, &champ); err != nil {
		return nil, err
	}
	state := &RunState{Lineage: in.Lineage}
	if champ.Found {
		state.ParentRunID, state.Warm = champ.RunID, &champ.Checkpoint
	}
	childID := childWorkflowID(ctx, "challenger")
	child := workflow.WithChildOptions(ctx, o.childOptions(childID))
	res := &RetrainResult{Lineage: in.Lineage}
	if err := workflow.ExecuteChildWorkflow(child, TrainingRunName, cfg, state).Get(ctx, &res.Challenger); err != nil {
		return nil, fmt.Errorf("retrain %s: challenger run %s: %w", in.Lineage, childID, err)
	}
	ck := res.Challenger.BestCheckpoint
	if ck == nil {
		ck = res.Challenger.LastCheckpoint
	}
	if ck == nil {
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("retrain %s: challenger run %s ended without a checkpoint", in.Lineage, res.Challenger.RunID), "NoCheckpoint", nil)
	}
	res.ChallengerCheckpoint = *ck

	refs := []activities.CheckpointRef{*ck}
	if champ.Found {
		refs = append(refs, champ.Checkpoint)
	}
	reports, err := o.evaluate(ctx, id, cfg, refs)
	if err != nil {
		return nil, err
	}
	res.ChallengerSharpe = reports.Reports[0].Sharpe
	// The decision is keyed by this execution (workflow id and run id): a
	// Schedule triggered twice within a second runs two Retrains under one
	// workflow id, and the second must record its own decision.
	exec := workflow.GetInfo(ctx).WorkflowExecution
	promo := activities.PromotionInput{
		RetrainID: exec.ID + "/" + exec.RunID, Lineage: in.Lineage, Challenger: *ck, ChallengerScore: &res.ChallengerSharpe,
	}
	res.ChallengerSharpeT = reports.Reports[0].SharpeT()
	// noEdge is why a challenger without evidence is not promoted, or "".
	noEdge := ""
	if cfg.Backtest.NoEdge(res.ChallengerSharpeT) {
		noEdge = fmt.Sprintf("the challenger's validation Sharpe %.4f has t = %.2f, below backtest.min_valid_t %.2f: no edge to promote (ADR 0016)",
			res.ChallengerSharpe, res.ChallengerSharpeT, cfg.Backtest.MinValidT)
	}
	if !champ.Found {
		promo.Promoted, promo.Reason = true, "the lineage had no champion"
		if noEdge != "" {
			promo.Promoted, promo.Reason = false, "the lineage has no champion, and "+noEdge
		}
	} else {
		inc := reports.Reports[1].Sharpe
		res.IncumbentRunID, res.IncumbentCheckpoint, res.IncumbentSharpe = champ.RunID, &champ.Checkpoint, &inc
		promo.Incumbent, promo.IncumbentScore = &champ.Checkpoint, &inc
		promo.Promoted = res.ChallengerSharpe > inc
		cmp := "is not above"
		if promo.Promoted {
			cmp = "beats"
		}
		promo.Reason = fmt.Sprintf("challenger validation Sharpe %.4f %s incumbent %.4f (run %s) on the same window",
			res.ChallengerSharpe, cmp, inc, champ.RunID)
		if noEdge != "" {
			promo.Promoted, promo.Reason = false, promo.Reason+"; "+noEdge
		}
	}
	var rec activities.PromotionOutput
	if err := workflow.ExecuteActivity(cctx, ca.RecordPromotion, promo).Get(ctx, &rec); err != nil {
		return nil, err
	}
	res.Promoted, res.Reason = rec.Promoted, rec.Reason
	return res, nil
}

// evaluate backtests refs on cfg's validation window in a session on a GPU
// worker, recovering from a lost worker like a training run does.
func (o Options) evaluate(ctx workflow.Context, id string, cfg config.RunConfig, refs []activities.CheckpointRef) (activities.EvaluateOutput, error) {
	var out activities.EvaluateOutput
	for attempt := 1; ; attempt++ {
		sess, err := o.acquireSession(ctx, nil, id)
		if err != nil {
			return out, err
		}
		err = workflow.ExecuteActivity(o.sessionCtx(sess.ctx), ta.EvaluateCheckpoints,
			activities.EvaluateInput{Config: cfg, Checkpoints: refs}).Get(ctx, &out)
		sess.release()
		if err == nil {
			if len(out.Reports) != len(refs) {
				return out, fmt.Errorf("evaluate: %d reports for %d checkpoints", len(out.Reports), len(refs))
			}
			return out, nil
		}
		if ctx.Err() != nil || activities.IsFatal(err) || attempt > o.MaxRecoveries {
			return out, err
		}
		workflow.GetLogger(ctx).Warn("Evaluating checkpoints failed; trying on a new session", "attempt", attempt, "error", err)
	}
}
