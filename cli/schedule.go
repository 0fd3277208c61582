package cli

import (
	"context"
	"encoding/json"
	"fmt"

	"sort"
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/workflows"
)

// runSchedule implements "dqnflow schedule create|list|delete": periodic
// Retrain workflows on Temporal Schedules.
func runSchedule(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: want \"dqnflow schedule create|list|delete ...\"", errUsage)
	}
	switch args[0] {
	case "create":
		return scheduleCreate(ctx, e, args[1:])
	case "list":
		return scheduleList(ctx, e, args[1:])
	case "delete":
		return scheduleDelete(ctx, e, args[1:])
	}
	return fmt.Errorf("%w: unknown schedule command %q: want create, list or delete", errUsage, args[0])
}

var overlapPolicies = map[string]enums.ScheduleOverlapPolicy{
	"skip":            enums.SCHEDULE_OVERLAP_POLICY_SKIP,
	"buffer-one":      enums.SCHEDULE_OVERLAP_POLICY_BUFFER_ONE,
	"buffer-all":      enums.SCHEDULE_OVERLAP_POLICY_BUFFER_ALL,
	"cancel-other":    enums.SCHEDULE_OVERLAP_POLICY_CANCEL_OTHER,
	"terminate-other": enums.SCHEDULE_OVERLAP_POLICY_TERMINATE_OTHER,
	"allow-all":       enums.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL,
}

func scheduleCreate(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "schedule create")
	id := fs.String("id", "", "schedule id (required)")
	lineage := fs.String("lineage", "", "lineage to retrain (default: the schedule id)")
	cfgPath := fs.String("config", "", "RunConfig JSON of each retraining run (default: built-in defaults)")
	every := fs.Duration("every", 0, "interval between runs, e.g. 24h")
	cron := fs.String("cron", "", "cron expression instead of --every, e.g. \"0 6 * * 1-5\"")
	overlap := fs.String("overlap", "skip", "when a run is still going: skip, buffer-one, buffer-all, cancel-other, terminate-other, allow-all")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if err := required(fs, "id"); err != nil {
		return err
	}
	if (*every > 0) == (*cron != "") {
		return fmt.Errorf("%w: give exactly one of --every and --cron", errUsage)
	}
	if *every < 0 {
		return fmt.Errorf("%w: flag --every %s: must be positive", errUsage, *every)
	}
	pol, ok := overlapPolicies[*overlap]
	if !ok {
		return fmt.Errorf("%w: flag --overlap %q: want one of %s", errUsage, *overlap, strings.Join(sortedKeys(overlapPolicies), ", "))
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	if *lineage == "" {
		*lineage = *id
	}
	spec := client.ScheduleSpec{}
	if *every > 0 {
		spec.Intervals = []client.ScheduleIntervalSpec{{Every: *every}}
	} else {
		spec.CronExpressions = []string{*cron}
	}
	c, err := dial(ctx, e)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID: *id, Spec: spec, Overlap: pol,
		Action: &client.ScheduleWorkflowAction{
			ID: "retrain-" + *lineage, Workflow: workflows.RetrainName, TaskQueue: workflows.ControlTaskQueue,
			Args: []any{workflows.RetrainInput{Lineage: *lineage, Config: cfg}},
		},
	})
	if err != nil {
		return fmt.Errorf("create schedule %s: %w", *id, err)
	}
	fmt.Fprintf(e.stdout, "schedule %s created: Retrain lineage %s, overlap %s\n", *id, *lineage, *overlap)
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

type scheduleRow struct {
	ID         string    `json:"id"`
	Spec       string    `json:"spec"`
	Paused     bool      `json:"paused"`
	NextAction time.Time `json:"next_action,omitempty"`
	Workflow   string    `json:"workflow"`
}

func scheduleList(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "schedule list")
	jsonOut := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	c, err := dial(ctx, e)
	if err != nil {
		return err
	}
	defer c.Close()
	it, err := c.ScheduleClient().List(ctx, client.ScheduleListOptions{})
	if err != nil {
		return fmt.Errorf("list schedules: %w", err)
	}
	rows := []scheduleRow{}
	for it.HasNext() {
		s, err := it.Next()
		if err != nil {
			return fmt.Errorf("list schedules: %w", err)
		}
		r := scheduleRow{ID: s.ID, Paused: s.Paused, Workflow: s.WorkflowType.Name}
		if s.Spec != nil {
			b, _ := json.Marshal(s.Spec)
			r.Spec = string(b)
		}
		if len(s.NextActionTimes) > 0 {
			r.NextAction = s.NextActionTimes[0]
		}
		rows = append(rows, r)
	}
	if *jsonOut {
		return printJSON(e, rows)
	}
	for _, r := range rows {
		fmt.Fprintf(e.stdout, "%-30s %-10s paused=%t next=%s %s\n", r.ID, r.Workflow, r.Paused, r.NextAction.Format(time.RFC3339), r.Spec)
	}
	return nil
}

func scheduleDelete(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "schedule delete")
	if err := parse(fs, args, 1); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: want \"dqnflow schedule delete ID\"", errUsage)
	}
	c, err := dial(ctx, e)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.ScheduleClient().GetHandle(ctx, fs.Arg(0)).Delete(ctx); err != nil {
		return fmt.Errorf("delete schedule %s: %w", fs.Arg(0), err)
	}
	fmt.Fprintf(e.stdout, "schedule %s deleted\n", fs.Arg(0))
	return nil
}

// gridFlag collects repeated --grid PATH=V1,V2 flags.
type gridFlag map[string][]json.RawMessage

func (g gridFlag) String() string { return "" }

func (g gridFlag) Set(s string) error {
	path, vals, ok := strings.Cut(s, "=")
	if !ok || path == "" || vals == "" {
		return fmt.Errorf("want PATH=V1,V2,... (for example optim.lr=1e-4,3e-4), got %q", s)
	}
	for _, v := range strings.Split(vals, ",") {
		v = strings.TrimSpace(v)
		if !json.Valid([]byte(v)) {
			v = fmt.Sprintf("%q", v) // a bare word is a string value
		}
		g[path] = append(g[path], json.RawMessage(v))
	}
	return nil
}

// runSweep implements "dqnflow sweep start".
func runSweep(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] != "start" {
		return fmt.Errorf("%w: want \"dqnflow sweep start --grid PATH=V1,V2 ...\"", errUsage)
	}
	fs := newFlags(e, "sweep start")
	cfgPath := fs.String("config", "", "base RunConfig JSON (default: built-in defaults)")
	grid := gridFlag{}
	fs.Var(grid, "grid", "a config key and its values, PATH=V1,V2,... (repeatable)")
	maxConc := fs.Int("max-concurrent", 2, fmt.Sprintf("runs in flight at once (1 to %d)", workflows.MaxSweepConcurrent))
	id := fs.String("id", "", "sweep id (default: sweep-<time>-<random>)")
	wait := fs.Bool("wait", false, "block until the sweep ends and print the best run")
	jsonOut := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args[1:], 0); err != nil {
		return err
	}
	if len(grid) == 0 {
		return fmt.Errorf("%w: give at least one --grid PATH=V1,V2", errUsage)
	}
	if *maxConc < 1 || *maxConc > workflows.MaxSweepConcurrent {
		return fmt.Errorf("%w: flag --max-concurrent %d: must be from 1 to %d", errUsage, *maxConc, workflows.MaxSweepConcurrent)
	}
	base, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	if *id == "" {
		*id = newRunID("sweep")
	}
	c, err := dial(ctx, e)
	if err != nil {
		return err
	}
	defer c.Close()
	run, err := startWorkflow(ctx, c, *id, workflows.SweepName, workflows.SweepInput{Base: base, Grid: grid, MaxConcurrent: *maxConc})
	if err != nil {
		return err
	}
	if !*wait {
		if *jsonOut {
			return printJSON(e, map[string]string{"sweep_id": *id})
		}
		fmt.Fprintln(e.stdout, *id)
		return nil
	}
	var res workflows.SweepResult
	if err := run.Get(ctx, &res); err != nil {
		return fmt.Errorf("sweep %s failed: %w", *id, err)
	}
	if *jsonOut {
		return printJSON(e, res)
	}
	fmt.Fprintf(e.stdout, "sweep %s: %d runs, best %s with validation Sharpe %.3f\n", *id, len(res.Points), res.BestRunID, res.BestValidSharpe)
	return nil
}
