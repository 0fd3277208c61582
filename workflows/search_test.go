package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"

	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/workflows"
)

// TestSearchAttributesAreUpsertedAtMostEveryFewSeconds trains 100 epochs
// of 100 ms (10 s of workflow time): the run upserts its search attributes
// when it starts and when its status changes, and in between at most once
// per Options.SearchAttributesEvery (5 s), not after every epoch; the last
// upsert carries the final epoch and status.
func TestSearchAttributesAreUpsertedAtMostEveryFewSeconds(t *testing.T) {
	f := newFake()
	f.trainTime = 100 * time.Millisecond
	env := newEnv(t, f, workflows.Options{SearchAttributesEvery: 5 * time.Second})
	var upserts []temporal.SearchAttributes
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		upserts = append(upserts, args.Get(0).(temporal.SearchAttributes))
	}).Return(nil)
	env.ExecuteWorkflow(workflows.TrainingRunName, smallConfig(100, 10, 10))
	r := result(t, env)
	if r.Epochs != 100 {
		t.Fatalf("result %+v, want 100 epochs", r)
	}
	// Start, two in-between (5 s and 10 s), completion; one more for slack.
	if len(upserts) > 5 {
		t.Errorf("%d upserts over 10 s of workflow time, want at most 5", len(upserts))
	}
	last := upserts[len(upserts)-1]
	epoch, _ := last.GetInt64(workflows.EpochKey)
	status, _ := last.GetKeyword(workflows.StatusKey)
	best, _ := last.GetFloat64(workflows.BestValidSharpeKey)
	if epoch != 100 || status != string(metadata.StatusCompleted) || best != r.BestValidSharpe {
		t.Errorf("last upsert: epoch %d, status %q, best %v; want 100, completed, %v", epoch, status, best, r.BestValidSharpe)
	}
}
