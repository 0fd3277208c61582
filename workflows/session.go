package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// ErrTypeNoWorker is the application error type of a run that waited
// Options.SessionWaitLimit without any GPU worker taking it.
const ErrTypeNoWorker = "NoGPUWorker"

// acquireSession returns a session on a GPU worker with a free slot. With a
// recreate token it first tries, for at most RecreateTimeout, the worker
// that issued the token (it may still hold the run's trainer); then any
// worker. Each attempt waits SessionCreationTimeout for a worker to accept;
// failed attempts are spaced by a backoff from 5 s doubling up to 1 min, and
// after SessionWaitLimit in all the run fails with ErrTypeNoWorker. The
// recreate token of the session is returned with it.
func (o Options) acquireSession(ctx workflow.Context, token []byte, what string) (workflow.Context, []byte, error) {
	return o.acquireSessionUnless(ctx, token, what, func() bool { return false })
}

// acquireSessionUnless is acquireSession that gives up with errStopped
// between attempts once stopped() is true.
func (o Options) acquireSessionUnless(ctx workflow.Context, token []byte, what string, stopped func() bool) (workflow.Context, []byte, error) {
	gpu := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: o.GPUTaskQueue})
	so := &workflow.SessionOptions{
		CreationTimeout:  o.SessionCreationTimeout,
		ExecutionTimeout: o.SessionExecutionTimeout,
		HeartbeatTimeout: o.SessionHeartbeatTimeout,
	}
	logger := workflow.GetLogger(ctx)
	if len(token) > 0 {
		sess, err := o.recreateSession(gpu, token, so)
		if err == nil {
			return sess, workflow.GetSessionInfo(sess).GetRecreateToken(), nil
		}
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		logger.Info("The previous worker did not take the session back; asking any GPU worker", "run", what, "error", err)
	}
	deadline := workflow.Now(ctx).Add(o.SessionWaitLimit)
	backoff := 5 * time.Second
	for {
		if stopped() {
			return nil, nil, errStopped
		}
		sess, err := workflow.CreateSession(gpu, so)
		if err == nil {
			return sess, workflow.GetSessionInfo(sess).GetRecreateToken(), nil
		}
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		now := workflow.Now(ctx)
		if !now.Before(deadline) {
			return nil, nil, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("%s: no GPU worker on task queue %q took the run within %s (last error: %v); "+
					"start one with `dqnflow worker --role gpu`, or free a slot, then start the run again",
					what, o.GPUTaskQueue, o.SessionWaitLimit, err),
				ErrTypeNoWorker, err)
		}
		logger.Info("No GPU worker took the session yet; retrying", "run", what, "backoff", backoff, "error", err)
		if _, err := workflow.AwaitWithTimeout(ctx, min(backoff, deadline.Sub(now)), stopped); err != nil {
			return nil, nil, err
		}
		if stopped() {
			return nil, nil, errStopped
		}
		backoff = min(2*backoff, time.Minute)
	}
}

// recreateSession recreates a session from token within RecreateTimeout.
// RecreateSession alone could wait for ever: on a live worker whose slots
// are all taken, the session creation is retried until a slot frees. A
// timer goroutine cancels the attempt; the session itself must be created
// by this coroutine, since a workflow context belongs to the coroutine that
// made it.
func (o Options) recreateSession(ctx workflow.Context, token []byte, so *workflow.SessionOptions) (workflow.Context, error) {
	rso := *so
	rso.CreationTimeout = min(so.CreationTimeout, o.RecreateTimeout)
	attempt, cancelAttempt := workflow.WithCancel(ctx)
	timer, cancelTimer := workflow.WithCancel(ctx)
	workflow.Go(timer, func(c workflow.Context) {
		if workflow.Sleep(c, o.RecreateTimeout) == nil {
			cancelAttempt()
		}
	})
	sess, err := workflow.RecreateSession(attempt, token, &rso)
	cancelTimer()
	if err == nil && attempt.Err() != nil {
		workflow.CompleteSession(sess) // created as the time ran out: give it back
		err = errors.New("recreating the session timed out")
	}
	return sess, err
}
