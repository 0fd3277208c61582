package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/checkpoint/s3test"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/store"
	"github.com/dqnflow/dqnflow/store/storetest"
	"github.com/dqnflow/dqnflow/worker/workertest"
	"github.com/dqnflow/dqnflow/workflows"
)

// stack is one test's Temporal dev server, PostgreSQL schema and dqnflow
// processes, all stopped or dropped when the test ends.
type stack struct {
	t      *testing.T
	dir    string // temporary directory: logs, server database, checkpoints
	bin    string // the dqnflow binary
	addr   string // Temporal frontend host:port
	dbURL  string // PostgreSQL URL whose search_path is the test's schema
	client client.Client
	// s3, when the test started one (useS3), holds the checkpoints of
	// the runs whose URIs are s3:// URLs.
	s3 *s3test.Server
}

// useS3 starts an S3 server (versitygw) for the stack and returns the
// --checkpoint-store URL of a prefix in its bucket; the workers get its
// credentials through the standard AWS variables (stack.env).
func (s *stack) useS3(prefix string) string {
	s.t.Helper()
	s.s3 = s3test.Start(s.t)
	return s.s3.URL(prefix)
}

// readBlob returns the bytes of the checkpoint blob at uri: a file, or an
// object of the stack's S3 server, fetched with the server's own client
// rather than the product's store.
func (s *stack) readBlob(uri string) ([]byte, error) {
	rest, ok := strings.CutPrefix(uri, "s3://")
	if !ok {
		return os.ReadFile(uri)
	}
	if s.s3 == nil {
		return nil, fmt.Errorf("checkpoint %s: the test started no S3 server", uri)
	}
	bucket, key, _ := strings.Cut(rest, "/")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := s.s3.Client().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", uri, err)
	}
	defer out.Body.Close()
	return io.ReadAll(out.Body)
}

func newStack(t *testing.T) *stack {
	t.Helper()
	s := &stack{t: t, dir: t.TempDir(), bin: dqnflowBinary(t)}
	s.dbURL = storetest.Schema(t, "dqnflow_e2e")
	s.addr, s.client = workertest.DevServerAt(t, filepath.Join(s.dir, "temporal.log"))
	return s
}

// env is the environment of the dqnflow processes: this process's, with
// the stack's Temporal server and database.
func (s *stack) env() []string {
	env := append(os.Environ(),
		"TEMPORAL_ADDRESS="+s.addr, "TEMPORAL_NAMESPACE=default", "DATABASE_URL="+s.dbURL)
	if s.s3 != nil {
		env = append(env, s.s3.Env()...)
	}
	return env
}

// startWorker starts `dqnflow worker --role all --device cpu` with extra
// flags and waits until it serves both task queues (it applies the
// migrations first).
func (s *stack) startWorker(name string, extra ...string) *proc {
	s.t.Helper()
	return s.startWorkerEnv(name, nil, extra...)
}

// startWorkerEnv is startWorker with extra environment variables (a fault
// plan, say: trainer/faults).
func (s *stack) startWorkerEnv(name string, env []string, extra ...string) *proc {
	s.t.Helper()
	args := append([]string{"worker", "--role", "all", "--device", "cpu", "--checkpoint-dir", s.dir}, extra...)
	p := startProc(s.t, name, filepath.Join(s.dir, name+".log"), append(s.env(), env...), s.bin, args...)
	waitFor(s.t, name+" to serve its task queues", time.Minute, 50*time.Millisecond, func() (bool, error) {
		if err := p.alive(); err != nil {
			return false, err
		}
		return strings.Contains(p.output(), " serving dqnflow-"), nil
	})
	return p
}

// openStore opens the stack's metadata store for the test's checks; it is
// closed when the test ends.
func (s *stack) openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), s.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

// dqnflow runs the dqnflow command line against the stack and returns its
// standard output; a failure fails the test with both outputs.
func (s *stack) dqnflow(args ...string) string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.bin, args...)
	cmd.Env = s.env()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		s.t.Fatalf("dqnflow %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

func randomHex(t *testing.T, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// errWorkflowClosed is returned by checks that find the run already ended.
var errWorkflowClosed = errors.New("the run ended")

// pendingActivity is one of a run's activities in flight, as
// DescribeWorkflowExecution reports it.
type pendingActivity struct {
	ID            string
	Type          string
	Started       bool                  // a worker runs it now
	Heartbeat     *activities.Heartbeat // nil before its first heartbeat
	LastHeartbeat time.Time             // zero before its first heartbeat
	// Worker is the identity of the worker that last took it
	// ("<pid>@<host>@<queue>", the SDK's default).
	Worker string
}

// stageActivities are the activities of their own that run a stage a
// RunEpochs heartbeat names, by that stage.
var stageActivities = map[string]string{"checkpoint": "Checkpoint", "backtest": "Backtest"}

// in reports whether the activity runs stage ("collect", "train",
// "checkpoint", "backtest") of an epoch: the stage's own activity, or a
// RunEpochs chunk whose last heartbeat names that stage.
func (pa pendingActivity) in(stage string) bool {
	if pa.Type == "RunEpochs" {
		return pa.Heartbeat != nil && pa.Heartbeat.Stage == stage
	}
	return pa.Type == stageActivities[stage]
}

// trains reports whether the activity runs epochs: a RunEpochs chunk.
func (pa pendingActivity) trains() bool {
	return pa.Type == "RunEpochs"
}

// pending returns run id's activities in flight, or an error wrapping
// errWorkflowClosed, with the run's result, when it has ended: a wait for
// something the run should do then fails at once instead of at its deadline.
func (s *stack) pending(ctx context.Context, id string) ([]pendingActivity, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	d, err := s.client.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return nil, fmt.Errorf("describe run %s: %w", id, err)
	}
	if st := d.GetWorkflowExecutionInfo().GetStatus(); st != enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		err := s.client.GetWorkflow(ctx, id, "").Get(ctx, nil)
		return nil, fmt.Errorf("%w: run %s is %s: %v", errWorkflowClosed, id, st, err)
	}
	var out []pendingActivity
	for _, pa := range d.GetPendingActivities() {
		a := pendingActivity{
			ID: pa.GetActivityId(), Type: pa.GetActivityType().GetName(),
			Started: pa.GetState() == enums.PENDING_ACTIVITY_STATE_STARTED,
			Worker:  pa.GetLastWorkerIdentity(),
		}
		if ts := pa.GetLastHeartbeatTime(); ts != nil {
			a.LastHeartbeat = ts.AsTime()
		}
		if pl := pa.GetHeartbeatDetails().GetPayloads(); len(pl) > 0 {
			var hb activities.Heartbeat
			if err := converter.GetDefaultDataConverter().FromPayload(pl[0], &hb); err == nil {
				a.Heartbeat = &hb
			}
		}
		out = append(out, a)
	}
	return out, nil
}

// startRun starts a training run of cfg under workflow id on the control
// task queue; a failure to start fails t.
func (s *stack) startRun(t *testing.T, id string, cfg config.RunConfig) {
	t.Helper()
	if _, err := s.client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: id, TaskQueue: workflows.ControlTaskQueue,
	}, workflows.TrainingRunName, cfg); err != nil {
		t.Fatalf("start run %s: %v", id, err)
	}
}

// waitInTraining waits until the training of epoch, or of a later one, of
// run id has reported a step and has steps left, and returns that
// activity; it fails the test as soon as one of workers exits.
func (s *stack) waitInTraining(id string, epoch int, workers ...*proc) pendingActivity {
	s.t.Helper()
	return s.waitActivity(fmt.Sprintf("the training of epoch %d to report a step", epoch), id, func(pa pendingActivity) bool {
		hb := pa.Heartbeat
		return pa.in("train") && hb != nil && hb.Epoch >= epoch && hb.Step > 0 && hb.Step < hb.Steps
	}, workers...)
}

// waitActivity waits, for 3 minutes at most, until a started activity of
// run id matches, and returns it; it fails the test with what it waited
// for, or as soon as one of workers exits.
func (s *stack) waitActivity(what, id string, match func(pendingActivity) bool, workers ...*proc) pendingActivity {
	s.t.Helper()
	var found pendingActivity
	waitFor(s.t, what, 3*time.Minute, 50*time.Millisecond, func() (bool, error) {
		for _, w := range workers {
			if err := w.alive(); err != nil {
				return false, err
			}
		}
		acts, err := s.pending(context.Background(), id)
		if err != nil {
			return false, err
		}
		for _, pa := range acts {
			if pa.Started && match(pa) {
				found = pa
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

// checkpointRows returns the checkpoint rows of run id in the stack's
// store.
func (s *stack) checkpointRows(t *testing.T, id string) []metadata.CheckpointRecord {
	t.Helper()
	rows, err := s.openStore(t).ListCheckpoints(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// writeConfig writes cfg as JSON to path, for a --config flag, and returns
// path.
func writeConfig(t *testing.T, path string, cfg config.RunConfig) string {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// endToEnd skips the test under -short: it starts what starts names
// (servers, worker processes), which takes from seconds to minutes.
func endToEnd(t *testing.T, starts string) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: starts " + starts)
	}
}

// waitClosed waits until run id has ended, failing the test at timeout or
// as soon as one of workers exits, and returns the run's result.
func (s *stack) waitClosed(id string, timeout time.Duration, workers ...*proc) workflows.RunResult {
	s.t.Helper()
	ctx := context.Background()
	waitFor(s.t, "run "+id+" to end", timeout, 200*time.Millisecond, func() (bool, error) {
		for _, w := range workers {
			if err := w.alive(); err != nil {
				return false, err
			}
		}
		_, err := s.pending(ctx, id)
		if errors.Is(err, errWorkflowClosed) {
			return true, nil
		}
		return false, err
	})
	var res workflows.RunResult
	if err := s.client.GetWorkflow(ctx, id, "").Get(ctx, &res); err != nil {
		s.t.Fatalf("run %s: %v", id, err)
	}
	return res
}

// history returns every event of workflow id's history (its latest run),
// read within 30 s; the test fails where the server does not give it.
func history(t *testing.T, c client.Client, id string) []*historypb.HistoryEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var evs []*historypb.HistoryEvent
	it := c.GetWorkflowHistory(ctx, id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatalf("history of workflow %s: %v", id, err)
		}
		evs = append(evs, ev)
	}
	return evs
}
