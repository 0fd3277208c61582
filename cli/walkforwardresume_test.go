package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dqnflow/dqnflow/research/wfrun"
	"github.com/dqnflow/dqnflow/worker/workertest"
	"github.com/dqnflow/dqnflow/workflows"
)

// TestWalkForwardStartResumesAStudyThatEnded runs "walkforward start"
// against a real Temporal dev server (no worker: a study started stays
// running) under one id: a second start while the study runs is
// refused; once it is terminated, a start with other seeds is refused
// naming them, the same study starts again as a resume (a new execution
// under the id, its input the study's, not fresh), and --fresh starts
// one with other seeds, fresh. An id of another workflow type is
// refused.
func TestWalkForwardStartResumesAStudyThatEnded(t *testing.T) {
	clearTemporalEnv(t)
	addr, c := workertest.DevServerAt(t, filepath.Join(t.TempDir(), "temporal.log"))
	ctx := context.Background()
	series := "../walkforward/testdata/EURUSD_H4.csv,../walkforward/testdata/GBPUSD_H4.csv"
	start := func(args ...string) (string, string, int) {
		return run(t, append([]string{"walkforward", "start", "--address", addr, "--series", series, "--id", "wf-again"}, args...)...)
	}
	terminate := func() {
		t.Helper()
		if err := c.TerminateWorkflow(ctx, "wf-again", "", "test"); err != nil {
			t.Fatal(err)
		}
	}
	if _, errOut, code := start(); code != 0 {
		t.Fatalf("first start: exit %d\n%s", code, errOut)
	}
	if _, errOut, code := start(); code == 0 || !strings.Contains(errOut, "is running") {
		t.Errorf("a start while the study runs: exit %d, %q; want a refusal saying it is running", code, errOut)
	}
	terminate()
	if _, errOut, code := start("--seeds", "2"); code == 0 || !strings.Contains(errOut, "another seeds") {
		t.Errorf("a start with other seeds: exit %d, %q; want a refusal naming the seeds", code, errOut)
	}
	first, err := c.DescribeWorkflowExecution(ctx, "wf-again", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := start(); code != 0 || !strings.Contains(errOut, "resumes") {
		t.Fatalf("the same study again: exit %d, %q; want it resumed", code, errOut)
	}
	second, err := c.DescribeWorkflowExecution(ctx, "wf-again", "")
	if err != nil {
		t.Fatal(err)
	}
	if second.GetWorkflowExecutionInfo().GetExecution().GetRunId() == first.GetWorkflowExecutionInfo().GetExecution().GetRunId() {
		t.Error("the resume started no new execution")
	}
	in, err := wfrun.StartInput(ctx, c, "wf-again", "")
	if err != nil {
		t.Fatal(err)
	}
	if in.Fresh || in.StudyID != "wf-again" {
		t.Errorf("the resumed execution's input: study %q, fresh %v; want wf-again, not fresh", in.StudyID, in.Fresh)
	}
	terminate()
	if _, errOut, code := start("--seeds", "2", "--fresh"); code != 0 || !strings.Contains(errOut, "--fresh") {
		t.Fatalf("other seeds with --fresh: exit %d, %q; want a fresh start", code, errOut)
	}
	if in, err = wfrun.StartInput(ctx, c, "wf-again", ""); err != nil || !in.Fresh || len(in.Seeds) != 2 {
		t.Errorf("the fresh execution's input: %+v, %v; want fresh, 2 seeds", in, err)
	}

	if _, errOut, code := run(t, "run", "start", "--address", addr, "--id", "a-run"); code != 0 {
		t.Fatalf("run start: exit %d\n%s", code, errOut)
	}
	if _, errOut, code := run(t, "walkforward", "start", "--address", addr, "--series", series, "--id", "a-run"); code == 0 ||
		!strings.Contains(errOut, workflows.TrainingRunName) {
		t.Errorf("walkforward start with a run's id: exit %d, %q; want a refusal naming its type", code, errOut)
	}
}
