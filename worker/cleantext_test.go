package worker_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/dqnflow/dqnflow/errtext"
	"github.com/dqnflow/dqnflow/worker"
	"github.com/dqnflow/dqnflow/worker/workertest"
)

// utf16Header is the first line of a CSV saved as UTF-16LE, as an error
// that quotes it holds it: a byte order mark that is not UTF-8, and NULs.
const utf16Header = "\xff\xfed\x00a\x00t\x00e\x00,\x00o\x00p\x00e\x00n\x00"

// badText is the text failingText quotes: the bytes Hex encodes, Repeat
// times. It travels hex-encoded because a payload is JSON, which would
// replace invalid UTF-8 with U+FFFD on the way.
type badText struct {
	Hex    string
	Repeat int
}

func (b badText) text() string {
	raw, err := hex.DecodeString(b.Hex)
	if err != nil {
		panic(err)
	}
	return strings.Repeat(string(raw), b.Repeat)
}

// failingText is the activity of TestBadTextFailureReachesTheWorkflow: it
// fails, non-retryably, with an error of type "BadData" whose message and
// cause quote the text.
func failingText(_ context.Context, in badText) error {
	cause := fmt.Errorf("line 1: the header has: %s", in.text())
	return temporal.NewNonRetryableApplicationError("prepare data a.csv: "+cause.Error()+"; fix the file", "BadData", cause)
}

// failText runs failingText once, with a start-to-close timeout that ends
// an attempt whose result never reaches the server.
func failText(ctx workflow.Context, in badText) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 4 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	return workflow.ExecuteActivity(ctx, failingText, in).Get(ctx, nil)
}

// TestBadTextFailureReachesTheWorkflow shows why a failure with bad text
// never reached the record, on a real dev server: the SDK sends an
// activity's failure as a protobuf message whose strings must be valid
// UTF-8, so it cannot send one that quotes a UTF-16 header; it logs that,
// and the attempt ends in the start-to-close timeout, a retryable timeout
// where the workflow should see a non-retryable BadData. With the workers'
// options (worker.ControlOptions, which install worker.CleanText) the
// failure arrives, of its type, with clean text, within a second: for
// invalid UTF-8, a NUL and a megabyte of text.
func TestBadTextFailureReachesTheWorkflow(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal dev server")
	}
	c := workertest.DevServer(t)
	for _, tc := range []struct {
		name string
		text badText
		// lost says whether the failure, without CleanText, never
		// reaches the server (the attempt times out instead).
		lost bool
	}{
		{"utf-16 header", badText{hex.EncodeToString([]byte(utf16Header)), 1}, true},
		{"invalid utf-8", badText{hex.EncodeToString([]byte("caf\xe9 \xc3\x28")), 1}, true},
		{"nul byte", badText{hex.EncodeToString([]byte("a\x00b")), 1}, false},
		{"1 MiB", badText{hex.EncodeToString([]byte("x")), 1 << 20}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.lost {
				err, _ := runFailText(t, c, sdkworker.Options{}, tc.text)
				var te *temporal.TimeoutError
				if !errors.As(err, &te) {
					t.Errorf("without CleanText the workflow saw %v; want the start-to-close timeout that the lost failure becomes", err)
				}
			}
			err, took := runFailText(t, c, worker.ControlOptions(), tc.text)
			var ae *temporal.ApplicationError
			if !errors.As(err, &ae) || ae.Type() != "BadData" || !ae.NonRetryable() {
				t.Fatalf("with CleanText the workflow saw %v; want the activity's non-retryable BadData failure", err)
			}
			for e := error(ae); e != nil; e = errors.Unwrap(e) {
				var msg string
				if a, ok := e.(*temporal.ApplicationError); ok {
					msg = a.Message()
				} else {
					msg = e.Error()
				}
				if msg != errtext.Clean(msg) {
					t.Errorf("a failure in the chain has unclean text: %.200q", msg)
				}
			}
			if want := errtext.Clean("prepare data a.csv: line 1: the header has: " + tc.text.text() + "; fix the file"); ae.Message() != want {
				t.Errorf("message %.200q, want %.200q", ae.Message(), want)
			}
			if took > 3*time.Second {
				t.Errorf("the failure took %v to reach the workflow; want well under the 4 s timeout", took)
			}
			t.Logf("%s: %s failure reached the workflow in %v", tc.name, ae.Type(), took.Round(time.Millisecond))
		})
	}
}

// runFailText runs failText on a worker of its own task queue with opts
// and returns the workflow's error and how long the workflow took.
func runFailText(t *testing.T, c client.Client, opts sdkworker.Options, text badText) (error, time.Duration) {
	t.Helper()
	queue := "clean-text-" + strings.ReplaceAll(t.Name(), "/", "-") + fmt.Sprint(len(opts.Interceptors))
	w := sdkworker.New(c, queue, opts)
	w.RegisterWorkflow(failText)
	w.RegisterActivity(failingText)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, failText, text)
	if err != nil {
		t.Fatal(err)
	}
	err = run.Get(ctx, nil)
	return err, time.Since(start)
}

// TestCleanLoggerCleansEveryTextValue checks the log side: the message,
// string, error and Stringer values and With's fields come out clean,
// numbers untouched.
func TestCleanLoggerCleansEveryTextValue(t *testing.T) {
	var buf bytes.Buffer
	l := worker.CleanLogger(log.NewStructuredLogger(slog.New(slog.NewJSONHandler(&buf, nil))))
	big := strings.Repeat("y", 1<<20)
	l = log.With(l, "file", "a\x00.csv")
	l.Error("failed \x1b[2J", "error", errors.New("bad \xff"+big), "path", stringer("p\u202eq"), "epoch", 3)
	out := buf.String()
	for _, want := range []string{`"msg":"failed \\x1b[2J"`, `"file":"a\\x00.csv"`, `"error":"bad \\xff`, `"path":"p\\u202eq"`, `"epoch":3`, ` bytes cut) ... `} {
		if !strings.Contains(out, want) {
			t.Errorf("log line lacks %s: %.300s", want, out)
		}
	}
	if len(out) > 3*errtext.Limit || !utf8.ValidString(out) {
		t.Errorf("log line of %d bytes (valid UTF-8 %v); want a bounded, valid one", len(out), utf8.ValidString(out))
	}
}

type stringer string

func (s stringer) String() string { return string(s) }
