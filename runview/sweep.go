package runview

import (
	"context"
	"fmt"
	"sort"

	"go.temporal.io/sdk/client"

	"github.com/dqnflow/dqnflow/report"
	"github.com/dqnflow/dqnflow/store"
	"github.com/dqnflow/dqnflow/workflows"
)

// LoadSweep reads a closed Sweep workflow's result and each run's final
// loss from the store.
func LoadSweep(ctx context.Context, c client.Client, st store.Reader, id string) (report.Sweep, error) {
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
