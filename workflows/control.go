package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// controlError marks the failure of a control activity, which has retried
// until the store gave a non-retryable answer: it ends the run, since a new
// session would not change the store's answer.
type controlError struct{ err error }

func (e controlError) Error() string { return e.err.Error() }
func (e controlError) Unwrap() error { return e.err }

// control runs a control activity and waits for it.
func (r *run) control(activity, in, out any) error {
	if err := workflow.ExecuteActivity(r.o.controlCtx(r.ctx), activity, in).Get(r.ctx, out); err != nil {
		return controlError{r.o.controlTimedOut(fmt.Sprint(activity), err)}
	}
	return nil
}

// controlTimedOut turns the failure of a control activity that ran out of
// Options.ControlTimeout into a non-retryable ErrTypeControlTimeout error
// that names it and says what to check; other errors pass unchanged. A
// control activity is retried without an attempt limit, so a failure that
// is neither non-retryable nor a cancellation means the time ran out (the
// server reports retry state TIMEOUT; the SDK's test environment reports
// none).
func (o Options) controlTimedOut(what string, err error) error {
	var (
		ae  *temporal.ActivityError
		app *temporal.ApplicationError
	)
	if !errors.As(err, &ae) || (errors.As(err, &app) && app.NonRetryable()) || temporal.IsCanceledError(err) {
		return err
	}
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("%s did not succeed within %s (last failure: %v); check that the metadata store "+
			"(PostgreSQL, DATABASE_URL of the control workers) is reachable and that a control worker runs "+
			"(`dqnflow worker --role control`), then start the run again", what, o.ControlTimeout, errors.Unwrap(err)),
		ErrTypeControlTimeout, err)
}

// pendingCall is a control activity started without waiting for it.
type pendingCall struct {
	what string
	f    workflow.Future
	soft bool // its failure is logged, not fatal (retention)
}

// startControl starts a control activity that the run need not wait for;
// flush waits for it. A soft one (retention, which the next checkpoint
// repeats) gets a bounded number of attempts and only logs its failure.
func (r *run) startControl(what string, activity, in any, soft bool) {
	ctx := r.o.controlCtx(r.ctx)
	if soft {
		ctx = workflow.WithRetryPolicy(ctx, temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 8,
		})
	}
	r.pending = append(r.pending, pendingCall{what: what, f: workflow.ExecuteActivity(ctx, activity, in), soft: soft})
}

// flush waits for the control activities in flight and returns the first
// hard failure.
func (r *run) flush() error {
	var first error
	for _, p := range r.pending {
		err := p.f.Get(r.ctx, nil)
		switch {
		case err == nil:
		case p.soft:
			workflow.GetLogger(r.ctx).Warn("Control activity failed; it is repeated after the next checkpoint",
				"run", r.st.RunID, "activity", p.what, "error", err)
		case first == nil:
			first = controlError{r.o.controlTimedOut(p.what, err)}
		}
	}
	r.pending = r.pending[:0]
	return first
}
