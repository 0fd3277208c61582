package runview

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/dqnflow/dqnflow/errtext"
	"github.com/dqnflow/dqnflow/workflows"
)

// Schedules lists the schedules on c, each with how its last run ended.
func Schedules(ctx context.Context, c client.Client) ([]Schedule, error) {
	it, err := c.ScheduleClient().List(ctx, client.ScheduleListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	rows := []Schedule{}
	for it.HasNext() {
		s, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("list schedules: %w", err)
		}
		rows = append(rows, listed(ctx, c, s))
	}
	return rows, nil
}

// Schedule is one schedule as "schedule list" shows it.
type Schedule struct {
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
	LastRun *ScheduleRun         `json:"last_run,omitempty"`
}

// ScheduleRun is the last workflow a schedule started and how it ended.
type ScheduleRun struct {
	At         time.Time `json:"at"`
	WorkflowID string    `json:"workflow_id"`
	RunID      string    `json:"run_id"`
	// Status is the workflow's: running, completed, failed, ...; Result,
	// for a completed Retrain, its decision.
	Status string `json:"status"`
	Result string `json:"result,omitempty"`
}

// EveryMemo is the schedule memo key under which "schedule create"
// keeps --every or --cron as given: Temporal compiles a cron expression
// into calendars, which read worse.
const EveryMemo = "dqnflow_every"

// listed turns a schedule's list entry into its row, asking
// Temporal how its last run ended.
func listed(ctx context.Context, c client.Client, s *client.ScheduleListEntry) Schedule {
	r := Schedule{ID: s.ID, Workflow: s.WorkflowType.Name, Spec: s.Spec, Paused: s.Paused, Note: s.Note, Every: describeSpec(s.Spec)}
	if p := s.Memo.GetFields()[EveryMemo]; p != nil {
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
		r.LastRun = &ScheduleRun{At: a.ActualTime, WorkflowID: a.StartWorkflowResult.WorkflowID, RunID: a.StartWorkflowResult.FirstExecutionRunID}
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
		p := ShortDuration(iv.Every)
		if iv.Offset > 0 {
			p += " (offset " + ShortDuration(iv.Offset) + ")"
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

// ShortDuration is d without its zero minutes and seconds: "24h", "1h30m".
func ShortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// PrintSchedules writes rows as a table: id, when it runs, the next run,
// the last run and how it ended, paused.
func PrintSchedules(w io.Writer, rows []Schedule) {
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

// yesNo is "yes" or "no".
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
