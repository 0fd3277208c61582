package runview

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/workflows"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
)

// Progress queries the run's progress and, while an epoch trains, the
// latest heartbeat of its TrainEpoch or RunEpochs activity (epoch, stage,
// step and loss as of the last heartbeat that reached the server).
func Progress(ctx context.Context, c client.Client, id string) (workflows.Progress, *activities.Heartbeat, error) {
	var p workflows.Progress
	v, err := c.QueryWorkflow(ctx, id, "", workflows.ProgressQuery)
	if err != nil {
		return p, nil, fmt.Errorf("query run %s: %w", id, err)
	}
	if err := v.Get(&p); err != nil {
		return p, nil, fmt.Errorf("decode progress of run %s: %w", id, err)
	}
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return p, nil, nil
	}
	for _, pa := range desc.GetPendingActivities() {
		if name := pa.GetActivityType().GetName(); name != "RunEpochs" || pa.GetHeartbeatDetails() == nil {
			continue
		}
		var hb activities.Heartbeat
		if pl := pa.GetHeartbeatDetails().GetPayloads(); len(pl) > 0 {
			if err := converter.GetDefaultDataConverter().FromPayload(pl[0], &hb); err == nil {
				return p, &hb, nil
			}
		}
	}
	return p, nil, nil
}

// PrintProgress writes p, and live when not nil, as one line.
func PrintProgress(w io.Writer, p workflows.Progress, live *activities.Heartbeat) {
	fmt.Fprintf(w, "run %s [%s] %s: epoch %d/%d, step %d", p.RunID, p.Status, p.Phase, p.Epoch, p.Epochs, p.Step)
	if p.Epoch > 0 {
		fmt.Fprintf(w, ", loss %.4f", p.Loss)
	}
	if p.BestEpoch > 0 {
		fmt.Fprintf(w, ", best validation Sharpe %.3f (epoch %d), last %.3f", p.BestValidSharpe, p.BestEpoch, p.LastValidSharpe)
	}
	if live != nil {
		fmt.Fprintf(w, "; now: epoch %d %s step %d/%d, loss %.4f", live.Epoch, live.Stage, live.Step, live.Steps, live.Loss)
	}
	if p.Device != "" {
		fmt.Fprintf(w, "; %s backend on %s, %s", p.Backend, p.Device, p.Precision)
	}
	if p.Recoveries > 0 {
		fmt.Fprintf(w, "; %d recoveries", p.Recoveries)
	}
	fmt.Fprintln(w)
}

// ckURI is r's URI, "-" for none.
func ckURI(r *activities.CheckpointRef) string {
	if r == nil {
		return "-"
	}
	return r.URI
}

// Shown is what "run show" found of run ID: its progress from Temporal
// (nil, with QueryErr, when Temporal did not answer) and its record in
// the metadata store (nil, with StoreErr, when the store did not).
type Shown struct {
	ID       string
	Progress *workflows.Progress
	Live     *activities.Heartbeat
	QueryErr error
	Record   *Record
	StoreErr error
}

// Err is nil when Temporal or the store answered; else the error that
// says the run does not exist, or why neither could answer.
func (s Shown) Err(where Where) error {
	if s.Progress != nil || s.Record != nil {
		return nil
	}
	if IsNotFound(s.QueryErr) && errors.Is(s.StoreErr, metadata.ErrNotFound) {
		return NoSuchRun(where, s.ID)
	}
	return fmt.Errorf("run %s: Temporal: %v; metadata store: %v", s.ID, s.QueryErr, s.StoreErr)
}

// JSON is s as one JSON object: the progress and the record, or the
// errors in their place.
func (s Shown) JSON() map[string]any {
	out := map[string]any{"run_id": s.ID}
	if s.Progress != nil {
		out["progress"], out["training"] = s.Progress, s.Live
	} else {
		out["temporal_error"] = s.QueryErr.Error()
	}
	if rec := s.Record; rec != nil {
		out["run"], out["epochs"], out["checkpoints"], out["backtests"] = rec.Run, rec.Epochs, rec.Checkpoints, rec.Backtests
	} else {
		out["store_error"] = s.StoreErr.Error()
	}
	return out
}

// Print writes the progress line and the record's tables to stdout, and
// to stderr what could not be shown.
func (s Shown) Print(stdout, stderr io.Writer) {
	if s.Progress != nil {
		PrintProgress(stdout, *s.Progress, s.Live)
	} else {
		fmt.Fprintf(stderr, "run %s: no live answer from Temporal (%v); showing the metadata store\n", s.ID, s.QueryErr)
	}
	if s.Record == nil {
		fmt.Fprintf(stderr, "run %s: metadata store: %v\n", s.ID, s.StoreErr)
		return
	}
	PrintRecord(stdout, *s.Record)
}
