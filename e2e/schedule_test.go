package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/trainer/trainertest"
	"github.com/dqnflow/dqnflow/workflows"
)

// TestSweepAndScheduleThroughCLI: "sweep start --wait" runs one child run
// per grid point and reports the best; "schedule create" makes a Temporal
// Schedule of Retrain whose triggered run records a promotion decision,
// "schedule list" shows it and "schedule delete" removes it.
func TestSweepAndScheduleThroughCLI(t *testing.T) {
	endToEnd(t, "the Temporal dev server and a worker process")
	s := newStack(t)
	s.startWorker("worker")
	cfg := trainertest.SmallConfig()
	cfg.Epochs, cfg.StepsPerEpoch = 2, 4
	// Two four-step epochs show no edge: the evidence a promotion needs
	// (backtest.min_valid_t, ADR 0016) is turned off here, so that the
	// schedule's mechanics (champion, warm start, comparison) are what is
	// tested; TestRetrainPromotesOnlyAStrictlyBetterChallengerWithEvidence
	// tests the gate.
	cfg.Backtest.MinValidT = 0
	cfg.Checkpoint.Dir = filepath.Join(s.dir, "checkpoints")
	cfgPath := writeConfig(t, filepath.Join(s.dir, "run.json"), cfg)

	var sweep workflows.SweepResult
	sweepID := "e2e-sweep-" + randomHex(t, 3)
	decode(t, s.dqnflow("sweep", "start", "--config", cfgPath, "--grid", "optim.lr=0.001,0.0003", "--max-concurrent", "2", "--id", sweepID, "--wait", "--json"), &sweep)
	if len(sweep.Points) != 2 || sweep.BestRunID == "" {
		t.Fatalf("sweep result: %+v", sweep)
	}
	named := readmeSweepRunName(t, sweepID)
	for _, p := range sweep.Points {
		if p.Error != "" {
			t.Errorf("sweep point %d (%s) failed: %s", p.Index, p.RunID, p.Error)
		}
		if want := fmt.Sprintf(named, p.Index+1); !regexp.MustCompile(want).MatchString(p.RunID) {
			t.Errorf("sweep point %d is run %s; the README names the runs %s", p.Index, p.RunID, want)
		}
	}

	const id, lineage = "e2e-retrain", "e2e-lineage"
	s.dqnflow("schedule", "create", "--id", id, "--every", "24h", "--config", cfgPath, "--lineage", lineage)
	var listed []struct {
		ID       string `json:"id"`
		Workflow string `json:"workflow"`
	}
	waitFor(t, "schedule list to show "+id+" running "+workflows.RetrainName, 30*time.Second, 100*time.Millisecond, func() (bool, error) {
		decode(t, s.dqnflow("schedule", "list", "--json"), &listed)
		for _, l := range listed {
			if l.ID == id && l.Workflow == workflows.RetrainName {
				return true, nil
			}
		}
		return false, nil
	})

	// Trigger the schedule twice: the first Retrain finds no champion and
	// promotes its challenger; the second warm-starts from that champion and
	// decides against it on the same validation window.
	ctx := context.Background()
	h := s.client.ScheduleClient().GetHandle(ctx, id)
	retrain := func(n int) workflows.RetrainResult {
		t.Helper()
		if err := h.Trigger(ctx, client.ScheduleTriggerOptions{}); err != nil {
			t.Fatalf("trigger schedule %s: %v", id, err)
		}
		var wfID string
		waitFor(t, "the schedule to start Retrain", time.Minute, 100*time.Millisecond, func() (bool, error) {
			d, err := h.Describe(ctx)
			if err != nil {
				return false, err
			}
			if acts := d.Info.RecentActions; len(acts) >= n {
				wfID = acts[n-1].StartWorkflowResult.WorkflowID
				return true, nil
			}
			return false, nil
		})
		var res workflows.RetrainResult
		if err := s.client.GetWorkflow(ctx, wfID, "").Get(ctx, &res); err != nil {
			t.Fatalf("Retrain %s: %v", wfID, err)
		}
		if res.Lineage != lineage || res.Challenger.Status != metadata.StatusCompleted || res.Reason == "" {
			t.Fatalf("Retrain %s result: %+v", wfID, res)
		}
		return res
	}
	first := retrain(1)
	if !first.Promoted || first.IncumbentRunID != "" {
		t.Errorf("first Retrain of a new lineage: promoted %t, incumbent %q; want promoted without incumbent", first.Promoted, first.IncumbentRunID)
	}
	st := s.openStore(t)
	champ, err := st.Champion(ctx, lineage)
	if err != nil || champ.RunID != first.Challenger.RunID {
		t.Fatalf("champion of %s = %+v, %v; want run %s", lineage, champ, err, first.Challenger.RunID)
	}
	second := retrain(2)
	if second.IncumbentRunID != first.Challenger.RunID || second.IncumbentSharpe == nil {
		t.Errorf("second Retrain: incumbent %q (sharpe %v), want %s with a score", second.IncumbentRunID, second.IncumbentSharpe, first.Challenger.RunID)
	}
	if second.Promoted != (second.ChallengerSharpe > *second.IncumbentSharpe) {
		t.Errorf("second Retrain promoted=%t with challenger %.4f vs incumbent %.4f: want promotion only when strictly better",
			second.Promoted, second.ChallengerSharpe, *second.IncumbentSharpe)
	}

	// schedule list: the table shows the schedule, its interval and how
	// its last run ended (the second Retrain's decision).
	last := "kept the champion"
	if second.Promoted {
		last = "promoted " + second.Challenger.RunID
	}
	row := regexp.MustCompile(`(?m)^` + id + `\s+24h\s+\S+Z\s+\S+Z\s+completed: ` + regexp.QuoteMeta(last) + `\s+no$`)
	waitFor(t, "schedule list to show the last run's result", 30*time.Second, 100*time.Millisecond, func() (bool, error) {
		return row.MatchString(s.dqnflow("schedule", "list")), nil
	})

	s.dqnflow("schedule", "delete", id)
	// The list comes from the visibility store, which follows a delete
	// shortly after.
	waitFor(t, "schedule list to drop "+id, 30*time.Second, 100*time.Millisecond, func() (bool, error) {
		decode(t, s.dqnflow("schedule", "list", "--json"), &listed)
		for _, l := range listed {
			if l.ID == id {
				return false, nil
			}
		}
		return true, nil
	})
}

// readmeSweepRunName is the README's name of a sweep's runs ("the sweep's
// runs: lr-sweep-<8 hex digits>-001 ...") for sweep id as a regular
// expression, with %03d where the run's number goes.
func readmeSweepRunName(t *testing.T, id string) string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`the sweep's runs: (lr-sweep-.*?-001)`).FindSubmatch(readme)
	if m == nil {
		t.Fatal("the README does not name a sweep's runs (\"the sweep's runs: lr-sweep-...\")")
	}
	name := regexp.QuoteMeta(strings.TrimPrefix(string(m[1]), "lr-sweep"))
	name = strings.ReplaceAll(name, regexp.QuoteMeta("<8 hex digits>"), "[0-9a-f]{8}")
	name = strings.Replace(name, "001", "%03d", 1)
	return "^" + regexp.QuoteMeta(id) + name + "$"
}
