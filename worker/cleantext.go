package worker

import (
	"context"
	"fmt"

	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/dqnflow/dqnflow/errtext"
)

// CleanText is the worker interceptor that makes every error an activity
// or a workflow of this worker returns, and every line they log, safe to
// leave the process (errtext.Clean): the one place where text leaves a
// worker for Temporal. The SDK sends a failure as a protobuf message whose
// string fields must be valid UTF-8; an error that quotes other bytes (a
// UTF-16 file's header, say) cannot be sent, the SDK only logs that, and
// the activity ends in a timeout that looks like a lost worker instead of
// its own failure (TestInvalidUTF8FailureReachesTheWorkflow). A megabyte
// of error text, repeated in each level of its chain of causes, would
// pass the server's size limit the same way. ControlOptions and
// GPUOptions install it; it is pure, so it is safe in workflow code.
var CleanText interceptor.WorkerInterceptor = &cleanText{}

type cleanText struct {
	interceptor.WorkerInterceptorBase
}

func (*cleanText) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &cleanActivity{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}}
}

func (*cleanText) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &cleanWorkflow{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}}
}

type cleanActivity struct {
	interceptor.ActivityInboundInterceptorBase
}

func (a *cleanActivity) Init(outbound interceptor.ActivityOutboundInterceptor) error {
	return a.Next.Init(&cleanActivityOut{ActivityOutboundInterceptorBase: interceptor.ActivityOutboundInterceptorBase{Next: outbound}})
}

func (a *cleanActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	out, err := a.Next.ExecuteActivity(ctx, in)
	return out, cleanError(err)
}

type cleanActivityOut struct {
	interceptor.ActivityOutboundInterceptorBase
}

func (o *cleanActivityOut) GetLogger(ctx context.Context) log.Logger {
	return CleanLogger(o.Next.GetLogger(ctx))
}

type cleanWorkflow struct {
	interceptor.WorkflowInboundInterceptorBase
}

func (w *cleanWorkflow) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	return w.Next.Init(&cleanWorkflowOut{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: outbound}})
}

func (w *cleanWorkflow) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	out, err := w.Next.ExecuteWorkflow(ctx, in)
	return out, cleanError(err)
}

type cleanWorkflowOut struct {
	interceptor.WorkflowOutboundInterceptorBase
}

func (o *cleanWorkflowOut) GetLogger(ctx workflow.Context) log.Logger {
	return CleanLogger(o.Next.GetLogger(ctx))
}

// failures is the converter the SDK sends errors with: dqnflow's clients
// use the default one.
var failures = temporal.GetDefaultFailureConverter()

// cleanError returns err unchanged when every message and stack trace of
// the failure the SDK would send for it is clean text; else the error of
// the cleaned failure, which keeps err's types, retryability, details and
// chain of causes (the SDK sends an error decoded from a failure as that
// failure). A continue-as-new, a cancellation and every error dqnflow
// writes with clean text pass unchanged.
func cleanError(err error) error {
	if err == nil {
		return nil
	}
	f := failures.ErrorToFailure(err)
	if !cleanFailure(f) {
		return err
	}
	return failures.FailureToError(f)
}

// cleanFailure cleans the text of f and of its causes in place and reports
// whether any changed.
func cleanFailure(f *failurepb.Failure) bool {
	changed := false
	for ; f != nil; f = f.GetCause() {
		if m := errtext.Clean(f.GetMessage()); m != f.GetMessage() {
			f.Message, changed = m, true
		}
		if st := errtext.Clean(f.GetStackTrace()); st != f.GetStackTrace() {
			f.StackTrace, changed = st, true
		}
	}
	return changed
}

// CleanLogger returns a logger that writes through l with its message and
// every string, error or fmt.Stringer value cleaned (errtext.Clean): a
// log line then holds no NUL, no terminal escape and no megabyte of quoted
// data. worker.New wraps the registry's logger with it, and CleanText the
// loggers of activities and workflows.
func CleanLogger(l log.Logger) log.Logger {
	if l == nil {
		return nil
	}
	if c, ok := l.(cleanLogger); ok {
		return c
	}
	return cleanLogger{l}
}

type cleanLogger struct{ l log.Logger }

func (c cleanLogger) Debug(msg string, kv ...any) { c.l.Debug(errtext.Clean(msg), cleanValues(kv)...) }
func (c cleanLogger) Info(msg string, kv ...any)  { c.l.Info(errtext.Clean(msg), cleanValues(kv)...) }
func (c cleanLogger) Warn(msg string, kv ...any)  { c.l.Warn(errtext.Clean(msg), cleanValues(kv)...) }
func (c cleanLogger) Error(msg string, kv ...any) { c.l.Error(errtext.Clean(msg), cleanValues(kv)...) }

// With keeps the wrapped logger's fields (log.WithLogger), cleaned.
func (c cleanLogger) With(kv ...any) log.Logger {
	return cleanLogger{log.With(c.l, cleanValues(kv)...)}
}

// cleanValues returns kv with its strings, errors and Stringers cleaned;
// other values (numbers, times, durations) are left to the handler.
func cleanValues(kv []any) []any {
	out := make([]any, len(kv))
	for i, v := range kv {
		switch x := v.(type) {
		case string:
			out[i] = errtext.Clean(x)
		case error, fmt.Stringer:
			out[i] = errtext.Clean(fmt.Sprint(x)) // fmt survives a nil receiver

		default:
			out[i] = v
		}
	}
	return out
}
