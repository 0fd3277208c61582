package workflows

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/workflow"
)

// setPhase records what the run does now and shows it, with where the run
// stands, as the workflow's current details: the Temporal UI's workflow
// page and "temporal workflow describe" show them. Current details are
// workflow-local state that the SDK serves through its metadata query;
// they add no event to the history, so replay is unaffected.
func (r *run) setPhase(phase string) {
	r.phase = phase
	workflow.SetCurrentDetails(r.ctx, r.details())
}

// details renders Progress in Temporal's markdown, three short lines
// (hard line breaks) that fit the UI's Current Details panel: phase,
// status and trainer; epoch, step and loss; the validation scores.
func (r *run) details() string {
	p := r.progress()
	var b strings.Builder
	fmt.Fprintf(&b, "**Phase:** %s · **Status:** %s", p.Phase, p.Status)
	if p.Device != "" {
		fmt.Fprintf(&b, " · **Trainer:** %s, %s", p.Backend, p.Precision)
	}
	fmt.Fprintf(&b, "  \n**Epoch:** %d of %d · **Step:** %d", p.Epoch, p.Epochs, p.Step)
	if p.Epoch > 0 {
		fmt.Fprintf(&b, " · **Loss:** %.4f", p.Loss)
	}
	if p.BestEpoch > 0 {
		fmt.Fprintf(&b, "  \n**Best validation Sharpe:** %.3f at epoch %d · **Last:** %.3f", p.BestValidSharpe, p.BestEpoch, p.LastValidSharpe)
	}
	if p.Recoveries > 0 {
		fmt.Fprintf(&b, " · **Recoveries:** %d", p.Recoveries)
	}
	return b.String()
}
