package bench

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/store"
	"github.com/dqnflow/dqnflow/workflows"
)

// TemporalResult is what "dqnflow bench --temporal --json" prints.
type TemporalResult struct {
	Date    string `json:"date"`
	Address string `json:"address"`
	RunID   string `json:"run_id"`
	Epochs  int    `json:"epochs"`
	// Path is how the run trained: "chunks" (RunEpochs, a chunk of epochs
	// per activity, ADR 0010) or "per stage" (Collect, TrainEpoch,
	// SyncTarget, ... per epoch: workers from before ADR 0010).
	Path string `json:"path"`
	// Unit is what the percentiles are over: an epoch on the per-stage
	// path, a chunk on the chunk path. Measured counts the units: all but
	// the first and the last epochs (whose intervals include opening and
	// closing the trainer), or every chunk.
	Unit     string `json:"unit"`
	Measured int    `json:"measured"`
	// EpochMS is the wall time per epoch over the measured units; WorkMS the
	// part of it during which an activity was executing (union of
	// started→completed intervals); OverheadMS the rest: scheduling,
	// dispatch, workflow tasks and recording by Temporal. The means are per
	// epoch, the percentiles per Unit.
	EpochMSMean    float64 `json:"epoch_ms_mean"`
	WorkMSMean     float64 `json:"work_ms_mean"`
	OverheadMSMean float64 `json:"overhead_ms_mean"`
	OverheadMSP50  float64 `json:"overhead_ms_p50"`
	OverheadMSP90  float64 `json:"overhead_ms_p90"`
	OverheadMSMax  float64 `json:"overhead_ms_max"`
	// ActivitiesPerEpoch counts the activities scheduled per measured
	// epoch; EpochsPerChunk the epochs per RunEpochs call.
	ActivitiesPerEpoch float64 `json:"activities_per_epoch"`
	EpochsPerChunk     float64 `json:"epochs_per_chunk,omitempty"`
	// Over the run's whole history (run start to end, divided by Epochs):
	// history events and their bytes, workflow tasks (each one a round
	// trip: the server hands the worker an event, the worker answers with
	// commands), and activities.
	History historyCounts `json:"history"`
	// DB counts the metadata store's work during the run, per epoch, when
	// it is PostgreSQL: committed transactions and rows written (inserted,
	// updated, deleted), from pg_stat_database of its database.
	DB *dbCounts `json:"db,omitempty"`
}

// historyCounts are a run's history totals, and per epoch.
type historyCounts struct {
	// Runs counts the workflow runs (1 + the Continue-As-News).
	Runs                  int     `json:"runs"`
	Events                int     `json:"events"`
	Bytes                 int     `json:"bytes"`
	WorkflowTasks         int     `json:"workflow_tasks"`
	Activities            int     `json:"activities"`
	EventsPerEpoch        float64 `json:"events_per_epoch"`
	BytesPerEpoch         float64 `json:"bytes_per_epoch"`
	WorkflowTasksPerEpoch float64 `json:"workflow_tasks_per_epoch"`
	ActivitiesPerEpoch    float64 `json:"activities_per_epoch"`
}

// dbCounts are the store's transactions and row writes during a run.
type dbCounts struct {
	Database             string  `json:"database"`
	Transactions         int64   `json:"transactions"`
	RowWrites            int64   `json:"row_writes"`
	TransactionsPerEpoch float64 `json:"transactions_per_epoch"`
	RowWritesPerEpoch    float64 `json:"row_writes_per_epoch"`
}

// TemporalConfig is a run whose epochs do almost no work (one
// environment step, one gradient step of a tiny network) but keep the
// default cadence: a checkpoint and a validation backtest every epoch.
func TemporalConfig(epochs int) config.RunConfig {
	cfg := config.Defaults()
	cfg.Epochs, cfg.StepsPerEpoch, cfg.BatchSize = epochs, 1, 8
	cfg.Data.Path, cfg.Data.SyntheticBars = "synthetic", 2500
	cfg.Data.TrainFraction = 0.75 // with the default test_fraction 0.15, a tenth validates
	cfg.Model = config.ModelConfig{Trunk1: 8, Trunk2: 8, Head: 4, Atoms: 5, VMin: -10, VMax: 10}
	cfg.Env.NumEnvs, cfg.Env.EpisodeBars, cfg.Env.CollectSteps = 1, 64, 1
	cfg.Replay.Capacity, cfg.Replay.Warmup = 64, 8
	cfg.Checkpoint.KeepLast = 2
	cfg.Backtest.Patience = 0 // every epoch runs: no early stop on a flat score
	return cfg
}

// Start starts workflow name with arg, under id, on the control task
// queue.
type Start func(ctx context.Context, c client.Client, id, name string, arg any) (client.WorkflowRun, error)

// Temporal runs a near-empty TrainingRun of epochs epochs (at least 4)
// as id, through start, on c, the Temporal server at address (a worker
// must serve it, for example "dqnflow dev"), and measures Temporal's overhead per epoch from the run's history, and the
// metadata store's work when it is PostgreSQL.
func Temporal(ctx context.Context, c client.Client, address, id string, epochs int, start Start) (TemporalResult, error) {
	var res TemporalResult
	db, err := openDBStats(ctx)
	if err != nil {
		return res, err
	}
	if db != nil {
		defer db.Close(ctx)
	}
	before, err := db.read(ctx)
	if err != nil {
		return res, err
	}
	run, err := start(ctx, c, id, workflows.TrainingRunName, TemporalConfig(epochs))
	if err != nil {
		return res, err
	}
	first := run.GetRunID() // Get follows the Continue-As-News and moves it on
	if err := run.Get(ctx, nil); err != nil {
		return res, fmt.Errorf("benchmark run %s: %w", id, err)
	}
	res, err = measureEpochs(ctx, c, id, first, epochs)
	if err != nil {
		return res, err
	}
	if db != nil {
		// PostgreSQL publishes a connection's counts when it has been idle
		// for up to 10 s (PGSTAT_IDLE_INTERVAL, PostgreSQL 15); the
		// workers' pooled connections are idle once the run has ended.
		select {
		case <-time.After(11 * time.Second):
		case <-ctx.Done():
			return res, ctx.Err()
		}
		after, err := db.read(ctx)
		if err != nil {
			return res, err
		}
		n := float64(epochs)
		tx, rows := after.tx-before.tx, after.rows-before.rows
		res.DB = &dbCounts{Database: db.name, Transactions: tx, RowWrites: rows,
			TransactionsPerEpoch: float64(tx) / n, RowWritesPerEpoch: float64(rows) / n}
	}
	res.Date, res.Address, res.RunID, res.Epochs = time.Now().UTC().Format(time.RFC3339), address, id, epochs
	return res, nil
}

// PrintTemporal writes res as lines of text.
func PrintTemporal(w io.Writer, res TemporalResult) {
	fmt.Fprintf(w, "Temporal overhead per epoch over %d epochs (%s path, %.1f activities each): mean %.2f ms; per %s p50 %.1f, p90 %.1f, max %.1f; epoch %.1f ms of which activities %.1f ms\n",
		res.Epochs, res.Path, res.ActivitiesPerEpoch, res.OverheadMSMean, res.Unit, res.OverheadMSP50, res.OverheadMSP90, res.OverheadMSMax, res.EpochMSMean, res.WorkMSMean)
	h := res.History
	fmt.Fprintf(w, "history: %.2f events, %.0f bytes, %.2f workflow tasks and %.2f activities per epoch (%d events in %d workflow runs)\n",
		h.EventsPerEpoch, h.BytesPerEpoch, h.WorkflowTasksPerEpoch, h.ActivitiesPerEpoch, h.Events, h.Runs)
	if d := res.DB; d != nil {
		fmt.Fprintf(w, "metadata store (PostgreSQL database %s): %.2f transactions and %.2f row writes per epoch\n",
			d.Database, d.TransactionsPerEpoch, d.RowWritesPerEpoch)
	}
}

// dbStats reads the activity counters of the metadata store's PostgreSQL
// database; a nil *dbStats (a SQLite store) reads zeros.
type dbStats struct {
	conn *pgx.Conn
	name string
}

type dbSample struct{ tx, rows int64 }

// openDBStats connects to the store that store.Locate picks, when it is
// PostgreSQL; nil for SQLite.
func openDBStats(ctx context.Context) (*dbStats, error) {
	loc, err := store.Locate(ctx, store.DefaultSQLiteFile, false)
	if err != nil || loc.SQLitePath() != "" {
		// No PostgreSQL store found: the writes go uncounted, the
		// benchmark of Temporal's overhead still runs.
		return nil, nil
	}
	conn, err := pgx.Connect(ctx, loc.URL)
	if err != nil {
		return nil, fmt.Errorf("metadata store %s: %w", loc, err)
	}
	s := &dbStats{conn: conn}
	if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&s.name); err != nil {
		conn.Close(ctx)
		return nil, fmt.Errorf("metadata store %s: %w", loc, err)
	}
	return s, nil
}

func (s *dbStats) read(ctx context.Context) (dbSample, error) {
	if s == nil {
		return dbSample{}, nil
	}
	var v dbSample
	err := s.conn.QueryRow(ctx, `SELECT xact_commit, tup_inserted + tup_updated + tup_deleted
		FROM pg_stat_database WHERE datname = current_database()`).Scan(&v.tx, &v.rows)
	if err != nil {
		return v, fmt.Errorf("read pg_stat_database of %s: %w", s.name, err)
	}
	return v, nil
}

func (s *dbStats) Close(ctx context.Context) { s.conn.Close(ctx) }

// span is one activity execution: scheduled, started, completed.
type span struct{ sched, from, to time.Time }

// history returns the events of workflow id's execution that began as
// run firstRunID, across its Continue-As-News, in order.
func history(ctx context.Context, c client.Client, id, firstRunID string) ([]*historypb.HistoryEvent, error) {
	var events []*historypb.HistoryEvent
	for runID := firstRunID; runID != ""; {
		next := ""
		it := c.GetWorkflowHistory(ctx, id, runID, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return nil, fmt.Errorf("history of %s (run %s): %w", id, runID, err)
			}
			if a := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
				next = a.GetNewExecutionRunId()
			}
			events = append(events, ev)
		}
		runID = next
	}
	return events, nil
}

// measureEpochs reads the run's history, from run firstRunID through its
// Continue-As-News. On the per-stage path it splits it into epochs at each
// Collect activity's scheduling; on the chunk path into chunks at each
// RunEpochs scheduling (the last ending when CloseTrainer is scheduled).
func measureEpochs(ctx context.Context, c client.Client, id, firstRunID string, epochs int) (TemporalResult, error) {
	res := TemporalResult{History: historyCounts{Runs: 1}}
	var marks []time.Time // Collect or RunEpochs scheduled
	var runs []span       // activities, scheduled → started → completed
	var chunkEpochs []int // epochs of each RunEpochs, in order
	var end time.Time     // CloseTrainer scheduled
	scheduled := map[int64]time.Time{}
	started := map[int64]time.Time{}
	events, err := history(ctx, c, id, firstRunID)
	if err != nil {
		return res, err
	}
	for _, ev := range events {
		res.History.Events++
		res.History.Bytes += proto.Size(ev)
		t := ev.GetEventTime().AsTime()
		switch ev.GetEventType() {
		case enums.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			res.History.WorkflowTasks++
		case enums.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
			res.History.Runs++
		case enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			res.History.Activities++
			scheduled[ev.GetEventId()] = t
			switch name := ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName(); name {
			case "Collect":
				res.Path = "per stage"
				marks = append(marks, t)
			case "RunEpochs":
				res.Path = "chunks"
				marks = append(marks, t)
			case "CloseTrainer":
				end = t
			}
		case enums.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			started[ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()] = t
		case enums.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			a := ev.GetActivityTaskCompletedEventAttributes()
			id := a.GetScheduledEventId()
			if s, ok := started[id]; ok {
				runs = append(runs, span{scheduled[id], s, t})
			}
			var out activities.EpochsOutput
			if res.Path == "chunks" && converter.GetDefaultDataConverter().FromPayloads(a.GetResult(), &out) == nil && len(out.Epochs) > 0 {
				chunkEpochs = append(chunkEpochs, len(out.Epochs))
			}
		}
	}
	n := float64(epochs)
	h := &res.History
	h.EventsPerEpoch, h.BytesPerEpoch = float64(h.Events)/n, float64(h.Bytes)/n
	h.WorkflowTasksPerEpoch, h.ActivitiesPerEpoch = float64(h.WorkflowTasks)/n, float64(h.Activities)/n

	// The units: epochs between Collect marks but the first and the last,
	// or chunks from one RunEpochs mark to the next (the last to the end).
	type unit struct {
		from, to time.Time
		epochs   int
	}
	var units []unit
	switch {
	case res.Path == "per stage" && len(marks) >= 4:
		res.Unit = "epoch"
		for i := 1; i+1 < len(marks); i++ {
			units = append(units, unit{marks[i], marks[i+1], 1})
		}
	case res.Path == "chunks" && len(marks) == len(chunkEpochs) && !end.IsZero():
		res.Unit = "chunk"
		for i := range marks {
			to := end
			if i+1 < len(marks) {
				to = marks[i+1]
			}
			units = append(units, unit{marks[i], to, chunkEpochs[i]})
		}
		res.EpochsPerChunk = n / float64(len(marks))
	default:
		return res, fmt.Errorf("history of %s: %d epoch or chunk activities (%s path), cannot measure; the benchmark needs at least 4 epochs", id, len(marks), res.Path)
	}
	var over []float64
	var epochSum, workSum, overSum, acts float64
	var measured int
	for _, u := range units {
		// The activities scheduled in this unit (not the session's own,
		// which spans the run), cut to it: retention or an epoch row may
		// still run when the next unit begins.
		var in []span
		for _, r := range runs {
			if !r.sched.Before(u.from) && r.sched.Before(u.to) {
				if r.to.After(u.to) {
					r.to = u.to
				}
				if r.from.Before(r.to) {
					in = append(in, r)
				}
			}
		}
		wall, work := ms(u.to.Sub(u.from)), ms(union(in))
		epochSum += wall
		workSum += work
		overSum += wall - work
		over = append(over, wall-work)
		acts += float64(len(in))
		measured += u.epochs
	}
	m := float64(measured)
	sort.Float64s(over)
	res.Measured = len(units)
	res.EpochMSMean, res.WorkMSMean, res.OverheadMSMean = epochSum/m, workSum/m, overSum/m
	res.OverheadMSP50 = over[len(over)/2]
	res.OverheadMSP90 = over[min(len(over)-1, int(0.9*float64(len(over))))]
	res.OverheadMSMax = over[len(over)-1]
	res.ActivitiesPerEpoch = acts / m
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
