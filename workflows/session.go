package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// ErrTypeNoWorker is the application error type of a run that waited
// Options.SessionWaitLimit without any GPU worker taking it.
const ErrTypeNoWorker = "NoGPUWorker"

// ErrTypeControlTimeout is the application error type of a run whose
// control activity kept failing for Options.ControlTimeout.
const ErrTypeControlTimeout = "ControlTimeout"

// session is a Temporal session on a GPU worker: the worker holds the
// run's trainer and counts the session against its slots until release.
type session struct {
	// ctx is for the session's activities: it is cancelled when the
	// workflow is cancelled or the session fails or is released.
	ctx workflow.Context
	// owner is the session's own context. It is not cancelled with the
	// workflow, so that CloseTrainer and the session's completion still
	// reach the worker when a run is cancelled (ADR 0001).
	owner workflow.Context
	host  string
	token []byte // recreates the session on the same worker

	stopWatch workflow.CancelFunc // ends the goroutine that cancels ctx with the workflow
}

// open reports whether the session is neither failed nor released.
func (s *session) open() bool {
	return workflow.GetSessionInfo(s.owner).SessionState == workflow.SessionStateOpen
}

// abandon stops watching the session without completing it, for a
// session whose worker is stopping (activities.ErrTypeWorkerStopping): it
// ends with the worker, and CompleteSession would wait 3 s for the
// completion activity that a stopped worker never takes.
func (s *session) abandon() {
	if s.stopWatch != nil {
		s.stopWatch()
	}
}

// release completes the session: the worker frees its slot at once.
func (s *session) release() {
	if s.stopWatch != nil {
		s.stopWatch()
	}
	workflow.CompleteSession(s.owner)
}

// acquireSession returns a session on a GPU worker with a free slot. With a
// recreate token it first tries, for at most RecreateTimeout, the worker
// that issued the token (it may still hold the run's trainer); then any
// worker. Each attempt waits SessionCreationTimeout for a worker to accept;
// failed attempts are spaced by a backoff from 5 s doubling up to 1 min, and
// after SessionWaitLimit in all the run fails with ErrTypeNoWorker.
func (o Options) acquireSession(ctx workflow.Context, token []byte, what string) (*session, error) {
	return o.acquireSessionUnless(ctx, token, what, func() bool { return false })
}

// acquireSessionUnless is acquireSession that gives up with errStopped
// between attempts once stopped() is true.
//
// The session is created on a context disconnected from ctx's
// cancellation, so that its clean-up can run after the workflow was
// cancelled; a goroutine passes the cancellation on to the attempt in
// progress and, later, to the session's activities.
func (o Options) acquireSessionUnless(ctx workflow.Context, token []byte, what string, stopped func() bool) (*session, error) {
	base, _ := workflow.NewDisconnectedContext(ctx)
	gpu := workflow.WithActivityOptions(base, workflow.ActivityOptions{TaskQueue: o.GPUTaskQueue})
	so := o.sessionOptions()
	logger := workflow.GetLogger(ctx)
	if len(token) > 0 {
		sess, err := createSession(ctx, gpu, token, so, o.RecreateTimeout)
		if err == nil {
			return o.watched(ctx, sess), nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		logger.Info("The previous worker did not take the session back; asking any GPU worker", "run", what, "error", err)
	}
	deadline := workflow.Now(ctx).Add(o.SessionWaitLimit)
	backoff := 5 * time.Second
	for {
		if stopped() {
			return nil, errStopped
		}
		sess, err := createSession(ctx, gpu, nil, so, o.SessionCreationTimeout)
		if err == nil {
			return o.watched(ctx, sess), nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		now := workflow.Now(ctx)
		if !now.Before(deadline) {
			return nil, o.noWorker(what, err)
		}
		logger.Info("No GPU worker took the session yet; retrying", "run", what, "backoff", backoff, "error", err)
		if _, err := workflow.AwaitWithTimeout(ctx, min(backoff, deadline.Sub(now)), stopped); err != nil {
			return nil, err
		}
		if stopped() {
			return nil, errStopped
		}
		backoff = min(2*backoff, time.Minute)
	}
}

func (o Options) sessionOptions() *workflow.SessionOptions {
	return &workflow.SessionOptions{
		CreationTimeout:  o.SessionCreationTimeout,
		ExecutionTimeout: o.SessionExecutionTimeout,
		HeartbeatTimeout: o.SessionHeartbeatTimeout,
	}
}

func (o Options) noWorker(what string, err error) error {
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("%s: no GPU worker on task queue %q took the run within %s (last error: %v); "+
			"start one with `dqnflow worker --role gpu`, or free a slot, then start the run again",
			what, o.GPUTaskQueue, o.SessionWaitLimit, err),
		ErrTypeNoWorker, err)
}

// watched wraps a session created on a disconnected context: its
// activities' context is cancelled when ctx, the workflow's, is.
func (o Options) watched(ctx, sess workflow.Context) *session {
	info := workflow.GetSessionInfo(sess)
	act, cancelAct := workflow.WithCancel(sess)
	watch, stopWatch := workflow.WithCancel(ctx)
	workflow.Go(watch, func(c workflow.Context) {
		c.Done().Receive(c, nil)
		if ctx.Err() != nil {
			cancelAct()
		}
	})
	return &session{ctx: act, owner: sess, host: info.HostName, token: info.GetRecreateToken(), stopWatch: stopWatch}
}

// createSession creates a session on base (recreates the one token names,
// when given). The attempt gives up after limit, or when ctx, the
// workflow's context, is cancelled: CreateSession alone could wait for
// ever, since the SDK retries an attempt that a worker refuses for lack of
// a slot with no end. A timer goroutine cancels the attempt; the session
// itself is created by this coroutine, since a workflow context belongs to
// the coroutine that made it.
func createSession(ctx, base workflow.Context, token []byte, so *workflow.SessionOptions, limit time.Duration) (workflow.Context, error) {
	attempt, cancelAttempt := workflow.WithCancel(base)
	timer, cancelTimer := workflow.WithCancel(ctx)
	created := false
	workflow.Go(timer, func(c workflow.Context) {
		_ = workflow.Sleep(c, limit)
		if !created {
			cancelAttempt()
		}
	})
	rso := *so
	rso.CreationTimeout = min(so.CreationTimeout, limit)
	var (
		sess workflow.Context
		err  error
	)
	if len(token) > 0 {
		sess, err = workflow.RecreateSession(attempt, token, &rso)
	} else {
		sess, err = workflow.CreateSession(attempt, &rso)
	}
	created = err == nil && attempt.Err() == nil
	cancelTimer()
	if err == nil && !created {
		workflow.CompleteSession(sess) // created as the time ran out: give it back
		err = fmt.Errorf("creating the session took longer than %s", limit)
	}
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	return sess, err
}
