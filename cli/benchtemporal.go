package cli

import (
	"context"
	"fmt"
	"sort"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/dqnflow/dqnflow/config"
)

// temporalBench is what "dqnflow bench --temporal --json" prints.
type temporalBench struct {
	Date    string `json:"date"`
	Address string `json:"address"`
	RunID   string `json:"run_id"`
	Epochs  int    `json:"epochs"`
	// Measured are the epochs measured: all but the first and the last,
	// whose intervals include opening and closing the trainer.
	Measured int `json:"measured"`
	// EpochMS is the wall time from one epoch's Collect being scheduled to
	// the next one's; WorkMS the part of it during which an activity was
	// executing (union of started→completed intervals); OverheadMS the
	// rest: scheduling, dispatch, workflow tasks and recording by Temporal.
	EpochMSMean    float64 `json:"epoch_ms_mean"`
	WorkMSMean     float64 `json:"work_ms_mean"`
	OverheadMSMean float64 `json:"overhead_ms_mean"`
	OverheadMSP50  float64 `json:"overhead_ms_p50"`
	OverheadMSP90  float64 `json:"overhead_ms_p90"`
	OverheadMSMax  float64 `json:"overhead_ms_max"`
	// ActivitiesPerEpoch counts the activities scheduled per measured epoch.
	ActivitiesPerEpoch float64 `json:"activities_per_epoch"`
}

// temporalBenchConfig is a run whose epochs do almost no work (one
// environment step, one gradient step of a tiny network) but keep the
// default cadence: a checkpoint and a validation backtest every epoch.
func temporalBenchConfig(epochs int) config.RunConfig {
	cfg := config.Defaults()
	cfg.Epochs, cfg.StepsPerEpoch, cfg.BatchSize = epochs, 1, 8
	cfg.Data.Path, cfg.Data.SyntheticBars = "synthetic", 2500
	cfg.Data.TrainFraction = 0.9
	cfg.Model = config.ModelConfig{Trunk1: 8, Trunk2: 8, Head: 4, Atoms: 5, VMin: -10, VMax: 10}
	cfg.Env.NumEnvs, cfg.Env.EpisodeBars, cfg.Env.CollectSteps = 1, 64, 1
	cfg.Replay.Capacity, cfg.Replay.Warmup = 64, 8
	cfg.Checkpoint.KeepLast = 2
	return cfg
}

// benchTemporal runs a near-empty TrainingRun on the Temporal server at
// TEMPORAL_ADDRESS (a worker must serve it, for example "dqnflow dev") and
// measures Temporal's overhead per epoch from the run's history.
func benchTemporal(ctx context.Context, e *env, epochs int, jsonOut bool) error {
	if epochs < 4 {
		return fmt.Errorf("%w: flag --epochs %d: the Temporal benchmark needs at least 4", errUsage, epochs)
	}
	c, err := dial(ctx, e)
	if err != nil {
		return err
	}
	defer c.Close()
	id := newRunID("bench-temporal")
	if err := startRun(ctx, c, id, temporalBenchConfig(epochs)); err != nil {
		return err
	}
	if err := c.GetWorkflow(ctx, id, "").Get(ctx, nil); err != nil {
		return fmt.Errorf("benchmark run %s: %w", id, err)
	}
	res, err := measureEpochs(ctx, c, id)
	if err != nil {
		return err
	}
	res.Date, res.Address, res.RunID, res.Epochs = time.Now().UTC().Format(time.RFC3339), e.conn.address(), id, epochs
	if jsonOut {
		return printJSON(e, res)
	}
	fmt.Fprintf(e.stdout, "Temporal overhead per epoch over %d epochs (%.1f activities each): mean %.1f ms, p50 %.1f, p90 %.1f, max %.1f; epoch %.1f ms of which activities %.1f ms\n",
		res.Measured, res.ActivitiesPerEpoch, res.OverheadMSMean, res.OverheadMSP50, res.OverheadMSP90, res.OverheadMSMax, res.EpochMSMean, res.WorkMSMean)
	return nil
}

// span is one activity execution: scheduled, started, completed.
type span struct{ sched, from, to time.Time }

// measureEpochs reads the run's history and splits it into epochs at each
// Collect activity's scheduling.
func measureEpochs(ctx context.Context, c client.Client, id string) (temporalBench, error) {
	var res temporalBench
	var marks []time.Time // Collect scheduled
	var runs []span       // activities, scheduled → started → completed
	scheduled := map[int64]time.Time{}
	started := map[int64]time.Time{}
	it := c.GetWorkflowHistory(ctx, id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return res, fmt.Errorf("history of %s: %w", id, err)
		}
		t := ev.GetEventTime().AsTime()
		switch ev.GetEventType() {
		case enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			scheduled[ev.GetEventId()] = t
			if ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == "Collect" {
				marks = append(marks, t)
			}
		case enums.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			started[ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()] = t
		case enums.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			id := ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()
			if s, ok := started[id]; ok {
				runs = append(runs, span{scheduled[id], s, t})
			}
		}
	}
	if len(marks) < 4 {
		return res, fmt.Errorf("history of %s has %d epochs, need at least 4", id, len(marks))
	}
	var over []float64
	var epochSum, workSum, acts float64
	for i := 1; i+1 < len(marks); i++ { // skip the first and last epochs
		from, to := marks[i], marks[i+1]
		var in []span // activities of this epoch (not the session's own, which spans the run)
		for _, r := range runs {
			if !r.sched.Before(from) && r.sched.Before(to) {
				in = append(in, r)
			}
		}
		epoch := ms(to.Sub(from))
		work := ms(union(in))
		epochSum += epoch
		workSum += work
		over = append(over, epoch-work)
		acts += float64(len(in))
	}
	n := float64(len(over))
	sort.Float64s(over)
	var sum float64
	for _, o := range over {
		sum += o
	}
	res.Measured = len(over)
	res.EpochMSMean, res.WorkMSMean, res.OverheadMSMean = epochSum/n, workSum/n, sum/n
	res.OverheadMSP50 = over[len(over)/2]
	res.OverheadMSP90 = over[min(len(over)-1, int(0.9*n))]
	res.OverheadMSMax = over[len(over)-1]
	res.ActivitiesPerEpoch = acts / n
	return res, nil
}

// union is the total time during which at least one of spans executed
// (started → completed), counting overlaps once.
func union(spans []span) time.Duration {
	cut := append([]span(nil), spans...)
	sort.Slice(cut, func(i, j int) bool { return cut[i].from.Before(cut[j].from) })
	var total time.Duration
	var end time.Time
	for _, s := range cut {
		if s.from.Before(end) {
			if s.to.After(end) {
				total += s.to.Sub(end)
				end = s.to
			}
			continue
		}
		total += s.to.Sub(s.from)
		end = s.to
	}
	return total
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
