package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/errtext"
	"github.com/dqnflow/dqnflow/workflows"
)

// scheduleCmd is "dqnflow schedule create|list|delete": periodic Retrain
// workflows on Temporal Schedules.
func scheduleCmd(e *env) *cobra.Command {
	return group("schedule", "periodic retraining: create, list, delete",
		"schedule manages Temporal Schedules that retrain a lineage periodically on the newest data.",
		scheduleCreateCmd(e), scheduleListCmd(e), scheduleDeleteCmd(e))
}

var overlapPolicies = map[string]enums.ScheduleOverlapPolicy{
	"skip":            enums.SCHEDULE_OVERLAP_POLICY_SKIP,
	"buffer-one":      enums.SCHEDULE_OVERLAP_POLICY_BUFFER_ONE,
	"buffer-all":      enums.SCHEDULE_OVERLAP_POLICY_BUFFER_ALL,
	"cancel-other":    enums.SCHEDULE_OVERLAP_POLICY_CANCEL_OTHER,
	"terminate-other": enums.SCHEDULE_OVERLAP_POLICY_TERMINATE_OTHER,
	"allow-all":       enums.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL,
}

func scheduleCreateCmd(e *env) *cobra.Command {
	cmd := leaf("create",
		"a Temporal Schedule that retrains a lineage",
		"create makes a Temporal Schedule that starts a Retrain of the lineage every interval (or on a cron expression): a challenger warm-started from the champion, promoted only when it beats it with evidence.",
		"dqnflow schedule create --id daily --every 24h --config rolling.json")
	fs := cmd.Flags()
	e.conn.register(fs)
	id := fs.String("id", "", "schedule id (required)")
	lineage := fs.String("lineage", "", "lineage to retrain (default: the schedule id)")
	cfgPath := fs.String("config", "", "RunConfig JSON of each retraining run (default: built-in defaults)")
	every := fs.Duration("every", 0, "interval between runs, e.g. 24h")
	cron := fs.String("cron", "", "cron expression instead of --every, e.g. \"0 6 * * 1-5\"")
	overlap := fs.String("overlap", "skip", "when a run is still going: skip, buffer-one, buffer-all, cancel-other, terminate-other, allow-all")
	flagValues(fs, "overlap", sortedKeys(overlapPolicies)...)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
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
		spec, when := client.ScheduleSpec{}, ""
		if *every > 0 {
			spec.Intervals = []client.ScheduleIntervalSpec{{Every: *every}}
			when = shortDuration(*every)
		} else {
			spec.CronExpressions = []string{*cron}
			when = "cron " + *cron
		}
		c, err := dial(ctx, e)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.ScheduleClient().Create(ctx, client.ScheduleOptions{
			ID: *id, Spec: spec, Overlap: pol, Memo: map[string]any{scheduleEveryMemo: when},
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
	return cmd
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// scheduleRow is one schedule as "schedule list" shows it.
type scheduleRow struct {
	ID       string `json:"id"`
	Workflow string `json:"workflow"`
	// Every is when it runs, as "schedule create" was told ("24h", "cron
	// 0 6 * * 1-5"), or from Spec for a schedule made elsewhere.
	Every string `json:"every"`
	// Spec is the schedule's spec as Temporal keeps it (a cron
	// expression compiled to calendars).
	Spec    *client.ScheduleSpec `json:"spec"`
	Paused  bool                 `json:"paused"`
	Note    string               `json:"note,omitempty"`
	NextRun *time.Time           `json:"next_run,omitempty"`
	LastRun *scheduleRun         `json:"last_run,omitempty"`
}

// scheduleRun is the last workflow a schedule started and how it ended.
type scheduleRun struct {
	At         time.Time `json:"at"`
	WorkflowID string    `json:"workflow_id"`
	RunID      string    `json:"run_id"`
	// Status is the workflow's: running, completed, failed, ...; Result,
	// for a completed Retrain, its decision.
	Status string `json:"status"`
	Result string `json:"result,omitempty"`
}

// scheduleEveryMemo is the schedule memo key under which "schedule create"
// keeps --every or --cron as given: Temporal compiles a cron expression
// into calendars, which read worse.
const scheduleEveryMemo = "dqnflow_every"

// scheduleListCmd is "dqnflow schedule list [--json]".
func scheduleListCmd(e *env) *cobra.Command {
	cmd := leaf("list",
		"the schedules: when each runs next, how its last run ended",
		"list prints the schedules: id, interval or cron, next run, last run and its result, paused.",
		"dqnflow schedule list",
		"dqnflow schedule list --json")
	fs := cmd.Flags()
	e.conn.register(fs)
	jsonOut := fs.Bool("json", false, "print JSON: every schedule with its spec as Temporal keeps it and its last run")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
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
			rows = append(rows, listedSchedule(ctx, c, s))
		}
		if *jsonOut {
			return printJSON(e, rows)
		}
		printSchedules(e.stdout, rows)
		return nil
	}
	return cmd
}

// listedSchedule turns a schedule's list entry into its row, asking
// Temporal how its last run ended.
func listedSchedule(ctx context.Context, c client.Client, s *client.ScheduleListEntry) scheduleRow {
	r := scheduleRow{ID: s.ID, Workflow: s.WorkflowType.Name, Spec: s.Spec, Paused: s.Paused, Note: s.Note, Every: describeSpec(s.Spec)}
	if p := s.Memo.GetFields()[scheduleEveryMemo]; p != nil {
		var every string
		if converter.GetDefaultDataConverter().FromPayload(p, &every) == nil && every != "" {
			r.Every = every
		}
	}
	// Temporal lists the times a paused schedule would run at; it runs at none.
	if len(s.NextActionTimes) > 0 && !s.Paused {
		r.NextRun = &s.NextActionTimes[0]
	}
	if n := len(s.RecentActions); n > 0 && s.RecentActions[n-1].StartWorkflowResult != nil {
		a := s.RecentActions[n-1]
		r.LastRun = &scheduleRun{At: a.ActualTime, WorkflowID: a.StartWorkflowResult.WorkflowID, RunID: a.StartWorkflowResult.FirstExecutionRunID}
		r.LastRun.Status, r.LastRun.Result = runOutcome(ctx, c, s.WorkflowType.Name, r.LastRun.WorkflowID)
	}
	return r
}

// runOutcome is the status of workflow id's run (its latest one: a
// Continue-As-New chain ends where it ends) and, for a completed Retrain,
// its decision; the error Temporal gave, when it does not say.
func runOutcome(ctx context.Context, c client.Client, workflow, id string) (status, result string) {
	d, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return "unknown (" + errtext.FirstLine(err.Error()) + ")", ""
	}
	st := d.GetWorkflowExecutionInfo().GetStatus()
	status = strings.ToLower(strings.TrimPrefix(st.String(), "WorkflowExecutionStatus"))
	if workflow != workflows.RetrainName || st != enums.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		return status, ""
	}
	var res workflows.RetrainResult
	if err := c.GetWorkflow(ctx, id, "").Get(ctx, &res); err != nil {
		return status, ""
	}
	if res.Promoted {
		return status, "promoted " + res.Challenger.RunID
	}
	return status, "kept the champion"
}

// describeSpec says when a schedule made elsewhere runs: its intervals,
// else its calendars in cron's field order (minute hour day-of-month
// month day-of-week), else its cron expressions.
func describeSpec(spec *client.ScheduleSpec) string {
	if spec == nil {
		return "-"
	}
	var parts []string
	for _, iv := range spec.Intervals {
		p := shortDuration(iv.Every)
		if iv.Offset > 0 {
			p += " (offset " + shortDuration(iv.Offset) + ")"
		}
		parts = append(parts, p)
	}
	for _, cal := range spec.Calendars {
		parts = append(parts, "calendar "+strings.Join([]string{
			calendarField(cal.Minute, 0, 59), calendarField(cal.Hour, 0, 23), calendarField(cal.DayOfMonth, 1, 31),
			calendarField(cal.Month, 1, 12), calendarField(cal.DayOfWeek, 0, 6)}, " "))
	}
	for _, cron := range spec.CronExpressions {
		parts = append(parts, "cron "+cron)
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, "; ")
}

// calendarField writes ranges as a cron field: "*" for every value from lo
// to hi, else "a", "a-b" or "a-b/step", joined by commas.
func calendarField(rs []client.ScheduleRange, lo, hi int) string {
	if len(rs) == 0 || len(rs) == 1 && rs[0].Start <= lo && rs[0].End >= hi && rs[0].Step <= 1 {
		return "*"
	}
	var out []string
	for _, r := range rs {
		f := strconv.Itoa(r.Start)
		if r.End > r.Start {
			f += "-" + strconv.Itoa(r.End)
		}
		if r.Step > 1 {
			f += "/" + strconv.Itoa(r.Step)
		}
		out = append(out, f)
	}
	return strings.Join(out, ",")
}

// shortDuration is d without its zero minutes and seconds: "24h", "1h30m".
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// printSchedules writes rows as a table: id, when it runs, the next run,
// the last run and how it ended, paused.
func printSchedules(w io.Writer, rows []scheduleRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "id\tevery\tnext run\tlast run\tresult\tpaused")
	at := func(t *time.Time) string {
		if t == nil || t.IsZero() {
			return "-"
		}
		return t.UTC().Format(time.RFC3339)
	}
	for _, r := range rows {
		last, result := "-", "-"
		if r.LastRun != nil {
			last, result = at(&r.LastRun.At), r.LastRun.Status
			if r.LastRun.Result != "" {
				result += ": " + r.LastRun.Result
			}
		}
		paused := yesNo(r.Paused)
		if r.Paused && r.Note != "" {
			paused += " (" + r.Note + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Every, at(r.NextRun), last, result, paused)
	}
	tw.Flush()
}

// scheduleDeleteCmd is "dqnflow schedule delete ID".
func scheduleDeleteCmd(e *env) *cobra.Command {
	cmd := leaf("delete ID",
		"delete a schedule",
		"delete removes a schedule; runs it started go on.",
		"dqnflow schedule delete daily")
	fs := cmd.Flags()
	e.conn.register(fs)
	cmd.Args = argsBetween(1, 1)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		c, err := dial(ctx, e)
		if err != nil {
			return err
		}
		defer c.Close()
		if err := c.ScheduleClient().GetHandle(ctx, args[0]).Delete(ctx); err != nil {
			return fmt.Errorf("delete schedule %s: %w", args[0], err)
		}
		fmt.Fprintf(e.stdout, "schedule %s deleted\n", args[0])
		return nil
	}
	return cmd
}
