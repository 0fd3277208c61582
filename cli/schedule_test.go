package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/dqnflow/dqnflow/worker/workertest"
	"github.com/dqnflow/dqnflow/workflows"
)

// TestScheduleListIsATable runs "schedule list" against a real Temporal
// dev server with three schedules: one every 24 hours that was triggered
// (its Retrain waits for a worker: running), one on a cron expression,
// paused, and one made with the SDK as another tool would, without the
// memo "schedule create" writes. The table shows each one's id, when it
// runs, the next run, the last run and its result, and whether it is
// paused; --json the same with Temporal's spec as an object.
func TestScheduleListIsATable(t *testing.T) {
	clearTemporalEnv(t)
	addr, c := workertest.DevServerAt(t, filepath.Join(t.TempDir(), "temporal.log"))
	ctx := context.Background()
	cli := func(args ...string) string {
		t.Helper()
		out, errOut, code := run(t, append(args, "--address", addr)...)
		if code != 0 {
			t.Fatalf("dqnflow %s: exit %d\n%s", strings.Join(args, " "), code, errOut)
		}
		return out
	}
	cli("schedule", "create", "--id", "daily", "--every", "24h")
	cli("schedule", "create", "--id", "weekdays", "--cron", "0 6 * * 1-5")
	sc := c.ScheduleClient()
	if err := sc.GetHandle(ctx, "weekdays").Pause(ctx, client.SchedulePauseOptions{Note: "holiday"}); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Create(ctx, client.ScheduleOptions{
		ID: "elsewhere", Spec: client.ScheduleSpec{CronExpressions: []string{"30 7 1 * *"}},
		Action: &client.ScheduleWorkflowAction{ID: "retrain-elsewhere", Workflow: workflows.RetrainName, TaskQueue: workflows.ControlTaskQueue,
			Args: []any{workflows.RetrainInput{Lineage: "elsewhere"}}},
	}); err != nil {
		t.Fatal(err)
	}
	if err := sc.GetHandle(ctx, "daily").Trigger(ctx, client.ScheduleTriggerOptions{}); err != nil {
		t.Fatal(err)
	}

	var rows []scheduleJSON
	deadline := time.Now().Add(time.Minute)
	for {
		// The list comes from the visibility store, which follows shortly.
		rows = nil // Unmarshal would decode into the last attempt's elements
		if err := json.Unmarshal([]byte(cli("schedule", "list", "--json")), &rows); err != nil {
			t.Fatal(err)
		}
		if len(rows) == 3 && rowOf(rows, "daily").LastRun != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("schedule list --json did not show three schedules and daily's run: %+v", rows)
		}
		time.Sleep(200 * time.Millisecond)
	}
	daily, weekdays, elsewhere := rowOf(rows, "daily"), rowOf(rows, "weekdays"), rowOf(rows, "elsewhere")
	if daily.Every != "24h" || daily.Workflow != workflows.RetrainName || daily.NextRun == nil || daily.Paused ||
		daily.LastRun.Status != "running" || !strings.HasPrefix(daily.LastRun.WorkflowID, "retrain-daily") || daily.Spec == nil || len(daily.Spec.Intervals) != 1 {
		t.Errorf("daily: %+v (last run %+v)", daily, daily.LastRun)
	}
	if weekdays.Every != "cron 0 6 * * 1-5" || !weekdays.Paused || weekdays.Note != "holiday" || weekdays.LastRun != nil || weekdays.NextRun != nil {
		t.Errorf("weekdays: %+v", weekdays)
	}
	if elsewhere.Every != "calendar 30 7 1 * *" {
		t.Errorf("a schedule made without dqnflow's memo: every %q, want its calendar in cron's fields", elsewhere.Every)
	}

	table := cli("schedule", "list")
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 4 || strings.Join(strings.Fields(lines[0]), " ") != "id every next run last run result paused" {
		t.Fatalf("schedule list is not a table of the three schedules:\n%s", table)
	}
	rfc := `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`
	for _, want := range []string{
		`(?m)^daily\s+24h\s+` + rfc + `\s+` + rfc + `\s+running\s+no$`,
		`(?m)^weekdays\s+cron 0 6 \* \* 1-5\s+-\s+-\s+-\s+yes \(holiday\)$`,
		`(?m)^elsewhere\s+calendar 30 7 1 \* \*\s+` + rfc + `\s+-\s+-\s+no$`,
	} {
		if !regexp.MustCompile(want).MatchString(table) {
			t.Errorf("schedule list lacks a line matching %s:\n%s", want, table)
		}
	}
	if strings.Contains(table, "{") {
		t.Errorf("schedule list prints a struct:\n%s", table)
	}
}

// scheduleJSON is what "schedule list --json" prints of a schedule.
type scheduleJSON struct {
	ID       string               `json:"id"`
	Workflow string               `json:"workflow"`
	Every    string               `json:"every"`
	Spec     *client.ScheduleSpec `json:"spec"`
	Paused   bool                 `json:"paused"`
	Note     string               `json:"note"`
	NextRun  *time.Time           `json:"next_run"`
	LastRun  *struct {
		WorkflowID string `json:"workflow_id"`
		Status     string `json:"status"`
	} `json:"last_run"`
}

// rowOf returns the row of schedule id, or an empty one.
func rowOf(rows []scheduleJSON, id string) scheduleJSON {
	for _, r := range rows {
		if r.ID == id {
			return r
		}
	}
	return scheduleJSON{}
}
