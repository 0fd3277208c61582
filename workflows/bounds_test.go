package workflows_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/workflows"
)

// TestControlActivityThatNeverSucceedsFailsTheRunWithinItsBound makes
// every SetRunDevice fail with a retryable error (the metadata store is
// down for good once the run is recorded): the run, which holds a GPU slot meanwhile, must fail
// with a ControlTimeout error that names the activity and what to check
// once Options.ControlTimeout has passed, not retry for ever.
func TestControlActivityThatNeverSucceedsFailsTheRunWithinItsBound(t *testing.T) {
	f := newFake()
	f.chunk = 1
	env := newEnv(t, nil, workflows.Options{ControlTimeout: 2 * time.Minute})
	env.OnActivity(ca.SetRunDevice, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.SetDeviceInput) (activities.SetDeviceOutput, error) {
			return activities.SetDeviceOutput{}, errors.New("connect to PostgreSQL: connection refused")
		})
	f.register(env)
	start := env.Now()
	env.ExecuteWorkflow(workflows.TrainingRunName, smallConfig(4, 1, 1))
	err := env.GetWorkflowError()
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != workflows.ErrTypeControlTimeout || !ae.NonRetryable() {
		t.Fatalf("workflow ended after %s with %v, want a non-retryable %s error", env.Now().Sub(start), err, workflows.ErrTypeControlTimeout)
	}
	for _, want := range []string{"set device", "2m0s", "connection refused", "PostgreSQL"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// Epoch 1's chunk trains for 10 minutes beside SetRunDevice, which
	// is retried for at most 2 minutes. (The test environment ends unbounded retries after
	// 10 attempts, about 4 minutes here; a server retries for ever.)
	if took := env.Now().Sub(start); took > trainTime+3*time.Minute {
		t.Errorf("the run failed after %s of workflow time, want at most 13m", took)
	}
	if seq := f.sequence(); !strings.HasSuffix(seq, " X") {
		t.Errorf("activities %s: the trainer was not closed", seq)
	}
}
