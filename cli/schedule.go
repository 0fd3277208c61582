package cli

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/runview"
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
			when = runview.ShortDuration(*every)
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
			ID: *id, Spec: spec, Overlap: pol, Memo: map[string]any{runview.EveryMemo: when},
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
		rows, err := runview.Schedules(ctx, c)
		return printResult(e, err, *jsonOut, rows, runview.PrintSchedules)
	}
	return cmd
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
