package activities_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/activities/activitiestest"
	"github.com/dqnflow/dqnflow/checkpoint"
	"github.com/dqnflow/dqnflow/checkpoint/bucket"
	"github.com/dqnflow/dqnflow/checkpoint/s3test"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/store"
	"github.com/dqnflow/dqnflow/trainer"
	"github.com/dqnflow/dqnflow/worker"
)

const runID = "run-1"

func testConfig() config.RunConfig {
	c := config.Defaults()
	c.StepsPerEpoch, c.Env.CollectSteps, c.Env.NumEnvs = 10, 4, 2
	// No backtest or checkpoint is due inside a chunk (rig.epoch): the tests
	// ask for them with the Backtest and Checkpoint activities.
	c.Checkpoint.Every, c.Backtest.Every = 1000, 1000
	return c
}

// rig is one GPU worker's session activities over a fake backend and an
// in-memory store.
type rig struct {
	t       *testing.T
	a       *activities.Trainer
	backend *activitiestest.Backend
	store   *store.SQLite
	reg     *worker.Registry
	env     *testsuite.TestActivityEnvironment
}

func newRig(t *testing.T, root string, st *store.SQLite) *rig {
	t.Helper()
	if st == nil {
		st = activitiestest.NewStore(t)
		if _, err := st.CreateRun(context.Background(), metadata.NewRun{RunID: runID, Config: testConfig().JSON()}); err != nil {
			t.Fatal(err)
		}
	}
	r := &rig{t: t, backend: &activitiestest.Backend{}, store: st, reg: worker.NewRegistry(0, nil)}
	r.a = &activities.Trainer{
		Backend: r.backend, Registry: r.reg, Store: st, Prepare: activitiestest.Dataset,
		Checkpoints: checkpoint.Local(root), HeartbeatInterval: time.Millisecond,
	}
	var s testsuite.WorkflowTestSuite
	r.env = s.NewTestActivityEnvironment()
	r.env.RegisterActivity(r.a)
	return r
}

// do runs activity fn with in and decodes its result into out (if not nil).
func (r *rig) do(fn, in, out any) error {
	r.t.Helper()
	v, err := r.env.ExecuteActivity(fn, in)
	if err != nil {
		return err
	}
	if out != nil {
		if err := v.Get(out); err != nil {
			r.t.Fatal(err)
		}
	}
	return nil
}

func (r *rig) must(fn, in, out any) {
	r.t.Helper()
	if err := r.do(fn, in, out); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) open(in activities.OpenInput) activities.OpenOutput {
	r.t.Helper()
	if in.RunID == "" {
		in.RunID = runID
	}
	if in.Config == (config.RunConfig{}) {
		in.Config = testConfig()
	}
	var out activities.OpenOutput
	r.must(r.a.OpenTrainer, in, &out)
	return out
}

// epoch trains epoch e alone, in a RunEpochs chunk of one epoch (which
// backtests and checkpoints it where the run's config makes that due):
// its result.
func (r *rig) epoch(e int) activities.EpochResult {
	r.t.Helper()
	var out activities.EpochsOutput
	r.must(r.a.RunEpochs, activities.EpochsInput{RunID: runID, After: e - 1, Until: e}, &out)
	if len(out.Epochs) != 1 || out.Epochs[0].Epoch != e {
		r.t.Fatalf("RunEpochs after %d until %d did %+v, want epoch %d", e-1, e, out.Epochs, e)
	}
	return out.Epochs[0]
}

// checkpointEpochs trains epochs 1 to n and checkpoints each: the refs,
// by epoch (refs[0] is empty).
func (r *rig) checkpointEpochs(n int) []activities.CheckpointRef {
	r.t.Helper()
	refs := make([]activities.CheckpointRef, n+1)
	for e := 1; e <= n; e++ {
		r.epoch(e)
		var ck activities.CheckpointOutput
		r.must(r.a.Checkpoint, activities.CheckpointInput{RunID: runID, Epoch: e}, &ck)
		refs[e] = ck.Checkpoint
	}
	return refs
}

// checkpointed is a rig in root (metadata in st, a new store when nil)
// that has opened the test run, trained its epoch 1 and checkpointed it:
// the rig and that checkpoint.
func checkpointed(t *testing.T, root string, st *store.SQLite) (*rig, activities.CheckpointOutput) {
	t.Helper()
	r := newRig(t, root, st)
	r.open(activities.OpenInput{})
	r.epoch(1)
	var ck activities.CheckpointOutput
	r.must(r.a.Checkpoint, activities.CheckpointInput{RunID: runID, Epoch: 1}, &ck)
	return r, ck
}

func errType(err error) string {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return ae.Type()
	}
	return ""
}

// TestEpochRunsOncePerEpoch: a chunk asked for again returns its recorded
// epochs without training, and the next chunk goes on from its end.
func TestEpochRunsOncePerEpoch(t *testing.T) {
	r := newRig(t, t.TempDir(), nil)
	r.open(activities.OpenInput{})
	in := activities.EpochsInput{RunID: runID, After: 0, Until: 1}
	var first, again activities.EpochsOutput
	r.must(r.a.RunEpochs, in, &first)
	r.must(r.a.RunEpochs, in, &again)

	tr := r.backend.Trainers()[0]
	if tr.Trains != 1 || tr.Step != 10 {
		t.Fatalf("a repeated chunk trained again: %d Train calls, global step %d, want 1 and 10", tr.Trains, tr.Step)
	}
	if !again.Replayed || !reflect.DeepEqual(again.Epochs, first.Epochs) {
		t.Errorf("repeated chunk = %+v, want the first result %+v replayed", again, first)
	}
	r.epoch(2)
	if tr.Step != 20 {
		t.Errorf("after epoch 2 the global step is %d, want 20", tr.Step)
	}
}

func TestStepOutOfOrderAsksForARestore(t *testing.T) {
	r := newRig(t, t.TempDir(), nil)
	r.open(activities.OpenInput{})
	for name, call := range map[string]func() error{
		"chunk skips epoch": func() error {
			return r.do(r.a.RunEpochs, activities.EpochsInput{RunID: runID, After: 1, Until: 2}, nil)
		},
		"checkpoint ahead": func() error { return r.do(r.a.Checkpoint, activities.CheckpointInput{RunID: runID, Epoch: 1}, nil) },
		"backtest ahead":   func() error { return r.do(r.a.Backtest, activities.BacktestInput{RunID: runID, Epoch: 1}, nil) },
		"unknown run": func() error {
			return r.do(r.a.RunEpochs, activities.EpochsInput{RunID: "other", After: 0, Until: 1}, nil)
		},
	} {
		if err := call(); errType(err) != activities.ErrTypeTrainerLost {
			t.Errorf("%s: error %v, want type %s", name, err, activities.ErrTypeTrainerLost)
		}
	}
	if r.backend.Trainers()[0].Trains != 0 {
		t.Error("a refused step trained")
	}
}

func TestFailedTrainDiscardsTheTrainer(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cause    error
		wantType string
		fatal    bool
	}{
		{"device error", errors.New("device lost"), activities.ErrTypeTrainerLost, false},
		{"non-finite loss", trainer.ErrNonFinite, activities.ErrTypeNonFinite, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, t.TempDir(), nil)
			r.open(activities.OpenInput{})
			r.backend.TrainErr = func(int64) error { return tc.cause }
			in := activities.EpochsInput{RunID: runID, After: 0, Until: 1}
			err := r.do(r.a.RunEpochs, in, nil)
			if errType(err) != tc.wantType || activities.IsFatal(err) != tc.fatal {
				t.Fatalf("error %v: type %q fatal %v, want %q fatal %v", err, errType(err), activities.IsFatal(err), tc.wantType, tc.fatal)
			}
			if r.reg.Get(runID) != nil || !r.backend.Trainers()[0].Closed {
				t.Error("the half-trained trainer is still held")
			}
			if err := r.do(r.a.RunEpochs, in, nil); errType(err) != activities.ErrTypeTrainerLost {
				t.Errorf("retry after the failure: %v, want %s", err, activities.ErrTypeTrainerLost)
			}
		})
	}
}

func TestOpenReusesOnlyATrainerAtTheExpectedStep(t *testing.T) {
	r := newRig(t, t.TempDir(), nil)
	r.open(activities.OpenInput{})
	tr := r.epoch(1)
	if out := r.open(activities.OpenInput{Epoch: 1, GlobalStep: tr.Train.GlobalStep}); !out.Reused || out.Epoch != 1 {
		t.Fatalf("open at the held point = %+v, want the held trainer", out)
	}
	if news, _ := r.backend.Counts(); news != 1 {
		t.Fatalf("%d trainers built, want 1", news)
	}
	out := r.open(activities.OpenInput{Epoch: 3, GlobalStep: 30})
	news, _ := r.backend.Counts()
	if out.Reused || out.Epoch != 0 || news != 2 || !r.backend.Trainers()[0].Closed {
		t.Fatalf("open at another point = %+v with %d trainers built; want a new trainer at epoch 0 and the old one closed", out, news)
	}
}

func TestCheckpointRestoresBitIdentically(t *testing.T) {
	root := t.TempDir()
	r, ck := checkpointed(t, root, nil)
	var again activities.CheckpointOutput
	r.must(r.a.Checkpoint, activities.CheckpointInput{RunID: runID, Epoch: 1}, &again)
	want := filepath.Join(root, "checkpoints", runID, "epoch-000001.safetensors")
	if ck.Checkpoint.URI != want || ck.Checkpoint.Epoch != 1 || ck.Checkpoint.GlobalStep != 10 {
		t.Fatalf("checkpoint = %+v, want %s at epoch 1, step 10", ck.Checkpoint, want)
	}
	if again.Checkpoint != ck.Checkpoint {
		t.Errorf("a repeated checkpoint differs: %+v vs %+v", again.Checkpoint, ck.Checkpoint)
	}
	row, err := r.store.GetCheckpoint(context.Background(), runID, 1)
	if err != nil || row.SHA256 != ck.Checkpoint.SHA256 || row.URI != want {
		t.Fatalf("store row %+v, want uri %s sha %s", row, want, ck.Checkpoint.SHA256)
	}

	// Another worker restores the checkpoint; both train epoch 2.
	other := newRig(t, root, r.store)
	out := other.open(activities.OpenInput{Epoch: 1, GlobalStep: 10, Resume: &ck.Checkpoint})
	if !out.Restored || out.Epoch != 1 || out.GlobalStep != 10 {
		t.Fatalf("open from the checkpoint = %+v, want restored at epoch 1, step 10", out)
	}
	r.epoch(2)
	other.epoch(2)
	a, b := r.backend.Trainers()[0], other.backend.Trainers()[0]
	if math.Float32bits(a.W) != math.Float32bits(b.W) || a.Step != b.Step || a.EnvSteps != b.EnvSteps {
		t.Errorf("restored run differs after epoch 2: w %x step %d env %d, uninterrupted w %x step %d env %d",
			math.Float32bits(b.W), b.Step, b.EnvSteps, math.Float32bits(a.W), a.Step, a.EnvSteps)
	}
}

func TestOpenRefusesADamagedOrMissingCheckpoint(t *testing.T) {
	root := t.TempDir()
	r, ck := checkpointed(t, root, nil)
	raw, err := os.ReadFile(ck.Checkpoint.URI)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-1] ^= 1
	if err := os.WriteFile(ck.Checkpoint.URI, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	missing := ck.Checkpoint
	missing.URI = filepath.Join(root, "nowhere.safetensors")
	for _, tc := range []struct {
		ref      activities.CheckpointRef
		wantType string
	}{{ck.Checkpoint, activities.ErrTypeCorruptCheckpoint}, {missing, activities.ErrTypeCheckpointMissing}} {
		other := newRig(t, root, r.store)
		err := other.do(other.a.OpenTrainer, activities.OpenInput{RunID: runID, Config: testConfig(), Epoch: 1, GlobalStep: 10, Resume: &tc.ref}, nil)
		if errType(err) != tc.wantType {
			t.Errorf("open from %s: %v, want type %s", tc.ref.URI, err, tc.wantType)
		}
		if news, restores := other.backend.Counts(); news+restores != 0 {
			t.Errorf("open from %s built a trainer anyway", tc.ref.URI)
		}
	}
}

// heartbeatSpy sees every heartbeat an activity records (the test
// environment's listener only sees those that pass the SDK's throttling).
type heartbeatSpy struct {
	interceptor.WorkerInterceptorBase
	beats chan activities.Heartbeat
}

func (s *heartbeatSpy) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &spyInbound{spy: s}
	i.Next = next
	return i
}

type spyInbound struct {
	interceptor.ActivityInboundInterceptorBase
	spy *heartbeatSpy
}

func (i *spyInbound) Init(outbound interceptor.ActivityOutboundInterceptor) error {
	o := &spyOutbound{spy: i.spy}
	o.Next = outbound
	return i.Next.Init(o)
}

type spyOutbound struct {
	interceptor.ActivityOutboundInterceptorBase
	spy *heartbeatSpy
}

func (o *spyOutbound) RecordHeartbeat(ctx context.Context, details ...any) {
	if len(details) == 1 {
		if hb, ok := details[0].(activities.Heartbeat); ok {
			select {
			case o.spy.beats <- hb:
			default:
			}
		}
	}
	o.Next.RecordHeartbeat(ctx, details...)
}

func TestRunEpochsHeartbeatsStepAndLoss(t *testing.T) {
	r := newRig(t, t.TempDir(), nil)
	spy := &heartbeatSpy{beats: make(chan activities.Heartbeat, 100)}
	r.env.SetWorkerOptions(sdkworker.Options{Interceptors: []interceptor.WorkerInterceptor{spy}})
	r.open(activities.OpenInput{})
	release := make(chan struct{})
	r.backend.BeforeStep = func(ctx context.Context, step int64) error {
		if step == 3 {
			<-release
		}
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- r.do(r.a.RunEpochs, activities.EpochsInput{RunID: runID, After: 0, Until: 1}, nil) }()
	// Training waits before step 4; the heartbeats must report step 3.
	deadline := time.After(10 * time.Second)
	for seen := false; !seen; {
		select {
		case hb := <-spy.beats:
			seen = hb.Epoch == 1 && hb.Stage == "train" && hb.Step == 3 && hb.GlobalStep == 3 && hb.Loss == 0.25
		case <-deadline:
			t.Fatal("no heartbeat with step 3 and loss 0.25 within 10 s")
		}
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestBacktestRecordsTheValidationScore(t *testing.T) {
	r := newRig(t, t.TempDir(), nil)
	r.backend.Sharpe = func(step int64) float64 { return float64(step) / 100 }
	r.open(activities.OpenInput{})
	r.epoch(1)
	var bt activities.BacktestOutput
	r.must(r.a.Backtest, activities.BacktestInput{RunID: runID, Epoch: 1}, &bt)
	if bt.Report.Sharpe != 0.1 {
		t.Errorf("Sharpe %g, want 0.1", bt.Report.Sharpe)
	}
	bts, err := r.store.ListBacktests(context.Background(), runID)
	if err != nil || len(bts) != 1 {
		t.Fatalf("recorded backtests %+v (%v), want one", bts, err)
	}
	rec := bts[0]
	if rec.Split != metadata.SplitValid || rec.Sharpe == nil || *rec.Sharpe != 0.1 {
		t.Errorf("recorded backtest %+v, want a valid split with Sharpe 0.1", rec)
	}
}

func TestWarmStartFromAnotherModelIsFatal(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "other.safetensors")
	info, err := checkpoint.Write(path, &checkpoint.Checkpoint{
		Meta:    map[string]string{checkpoint.MetaFormat: checkpoint.FormatVersion},
		Tensors: []checkpoint.Tensor{checkpoint.F32Tensor("not_w", []int{2}, []float32{1, 2})},
	}, checkpoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, root, nil)
	err = r.do(r.a.OpenTrainer, activities.OpenInput{RunID: runID, Config: testConfig(), Warm: &activities.CheckpointRef{URI: path, SHA256: info.SHA256}}, nil)
	if errType(err) != activities.ErrTypeIncompatibleCheckpoint || !activities.IsFatal(err) {
		t.Fatalf("warm start from another model: %v, want a fatal %s error", err, activities.ErrTypeIncompatibleCheckpoint)
	}
}

// TestCheckpointFilesAreKeyedOnTheExecution checkpoints epoch 1 of two
// executions that share a run id (a workflow id used again after the
// metadata store lost the first run's row): the second must write its own
// file, <run id>/<execution id>/epoch-000001.safetensors, and leave the
// first one's, which a champion may point at, as it was.
func TestCheckpointFilesAreKeyedOnTheExecution(t *testing.T) {
	root := t.TempDir()
	var cks []activities.CheckpointRef
	for _, exec := range []string{"exec-1", "exec-2"} {
		r := newRig(t, root, nil)
		r.open(activities.OpenInput{ExecutionID: exec})
		r.epoch(1)
		var ck activities.CheckpointOutput
		r.must(r.a.Checkpoint, activities.CheckpointInput{RunID: runID, Epoch: 1}, &ck)
		cks = append(cks, ck.Checkpoint)
	}
	for i, exec := range []string{"exec-1", "exec-2"} {
		if want := filepath.Join(root, "checkpoints", runID, exec, "epoch-000001.safetensors"); cks[i].URI != want {
			t.Errorf("checkpoint of %s at %s, want %s", exec, cks[i].URI, want)
		}
	}
	if _, _, err := checkpoint.ReadVerified(context.Background(), cks[0].URI, cks[0].SHA256, checkpoint.Options{}); err != nil {
		t.Errorf("the first execution's checkpoint: %v", err)
	}
}

// TestCheckpointsStayInsideTheRoot checks that a run config whose
// checkpoint.dir leads out of the worker's checkpoint root (an absolute
// path elsewhere, "..", a symbolic link inside the root pointing out) is
// refused when the run opens, before any trainer is built or any epoch
// trained, with a non-retryable InvalidConfig error naming checkpoint.dir
// (before, the refusal came at the first checkpoint, after an epoch of
// training); that a link planted after the open is still refused when the
// checkpoint is written; that nothing is written outside; and that a
// resume or warm start from a file outside the root is refused without
// reading it.
func TestCheckpointsStayInsideTheRoot(t *testing.T) {
	base := t.TempDir()
	root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
	for _, d := range []string{root, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{outside, "../outside", "ok/../../outside", "link", "link/deeper"} {
		r := newRig(t, root, nil)
		cfg := testConfig()
		cfg.Checkpoint.Dir = dir
		err := r.do(r.a.OpenTrainer, activities.OpenInput{RunID: runID, Config: cfg}, nil)
		if errType(err) != activities.ErrTypeInvalidConfig || !strings.Contains(err.Error(), "checkpoint.dir "+dir) ||
			!strings.Contains(err.Error(), "outside the checkpoint root") {
			t.Errorf("checkpoint.dir %q: %v; want InvalidConfig naming checkpoint.dir and the root", dir, err)
		}
		if news, restores := r.backend.Counts(); news+restores != 0 {
			t.Errorf("checkpoint.dir %q: a trainer was built before the refusal", dir)
		}
	}
	// A link planted after the run opened is refused when it is used.
	r := newRig(t, root, nil)
	cfg := testConfig()
	cfg.Checkpoint.Dir = "later"
	r.open(activities.OpenInput{Config: cfg})
	r.epoch(1)
	if err := os.Symlink(outside, filepath.Join(root, "later")); err != nil {
		t.Fatal(err)
	}
	err := r.do(r.a.Checkpoint, activities.CheckpointInput{RunID: runID, Epoch: 1}, nil)
	if errType(err) != activities.ErrTypeInvalidConfig || !strings.Contains(err.Error(), "checkpoint.dir later") ||
		!strings.Contains(err.Error(), "outside the checkpoint root") {
		t.Errorf("checkpoint.dir later, a link planted after the open: %v; want InvalidConfig naming checkpoint.dir and the root", err)
	}
	if _, err := r.store.GetCheckpoint(context.Background(), runID, 1); err == nil {
		t.Error("checkpoint.dir later: a checkpoint row was recorded")
	}
	entries, _ := os.ReadDir(outside)
	if len(entries) != 0 {
		t.Fatalf("files were written outside the root: %v", entries)
	}

	// A checkpoint written inside the root, copied outside: the copy is
	// intact, but is not read.
	r, ck := checkpointed(t, root, nil)
	raw, err := os.ReadFile(ck.Checkpoint.URI)
	if err != nil {
		t.Fatal(err)
	}
	out := ck.Checkpoint
	out.URI = filepath.Join(outside, "copy.safetensors")
	if err := os.WriteFile(out.URI, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	viaLink := ck.Checkpoint
	viaLink.URI = filepath.Join(root, "link", "copy.safetensors")
	for _, ref := range []activities.CheckpointRef{out, viaLink} {
		for _, in := range []activities.OpenInput{
			{RunID: runID, Config: testConfig(), Epoch: 1, GlobalStep: 10, Resume: &ref},
			{RunID: runID, Config: testConfig(), Warm: &ref},
		} {
			other := newRig(t, root, r.store)
			err := other.do(other.a.OpenTrainer, in, nil)
			if errType(err) != activities.ErrTypeInvalidConfig || !strings.Contains(err.Error(), "outside the checkpoint root") {
				t.Errorf("open from %s: %v; want InvalidConfig, outside the checkpoint root", ref.URI, err)
			}
			if news, restores := other.backend.Counts(); news+restores != 0 {
				t.Errorf("open from %s built a trainer anyway", ref.URI)
			}
		}
	}
}

// TestResumeElsewhereIsMarkedNotBitExact checks that a checkpoint records
// the backend, device and architecture that wrote it; that a resume where
// all three are the same is exact; and that a resume from a checkpoint
// written on another architecture reports why it is no longer bit-exact,
// and every later checkpoint of the run says so in its metadata.
func TestResumeElsewhereIsMarkedNotBitExact(t *testing.T) {
	root := t.TempDir()
	r, ck := checkpointed(t, root, nil)
	written, _, err := checkpoint.Read(context.Background(), ck.Checkpoint.URI, checkpoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	arch := runtime.GOOS + "/" + runtime.GOARCH
	if m := written.Meta; m[checkpoint.MetaArch] != arch || m[checkpoint.MetaBackend] == "" || m[checkpoint.MetaDevice] == "" {
		t.Fatalf("checkpoint origin: backend %q, device %q, arch %q; want all recorded, arch %s",
			m[checkpoint.MetaBackend], m[checkpoint.MetaDevice], m[checkpoint.MetaArch], arch)
	}
	if _, ok := written.Meta[checkpoint.MetaNotBitExact]; ok {
		t.Fatalf("a run never moved is marked not bit-exact: %q", written.Meta[checkpoint.MetaNotBitExact])
	}

	same := newRig(t, root, r.store)
	var out activities.OpenOutput
	same.must(same.a.OpenTrainer, activities.OpenInput{RunID: runID, Config: testConfig(), Epoch: 1, GlobalStep: 10, Resume: &ck.Checkpoint}, &out)
	if !out.Restored || out.NotBitExact != "" {
		t.Fatalf("resume on the same backend, device and architecture: restored %v, not bit-exact %q; want restored, exact", out.Restored, out.NotBitExact)
	}

	// The same checkpoint as if written on another architecture.
	other := "plan9/arm64"
	written.Meta[checkpoint.MetaArch] = other
	moved := ck.Checkpoint
	moved.URI = filepath.Join(root, "moved.safetensors")
	info, err := checkpoint.Write(moved.URI, written, checkpoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	moved.SHA256 = info.SHA256
	elsewhere := newRig(t, root, r.store)
	elsewhere.must(elsewhere.a.OpenTrainer, activities.OpenInput{RunID: runID, Config: testConfig(), Epoch: 1, GlobalStep: 10, Resume: &moved}, &out)
	if want := "arch " + other + ", now " + arch; !strings.Contains(out.NotBitExact, want) {
		t.Fatalf("resume from a checkpoint of %s: not bit-exact %q, want it to say %q", other, out.NotBitExact, want)
	}
	elsewhere.epoch(2)
	var next activities.CheckpointOutput
	elsewhere.must(elsewhere.a.Checkpoint, activities.CheckpointInput{RunID: runID, Epoch: 2}, &next)
	later, _, err := checkpoint.Read(context.Background(), next.Checkpoint.URI, checkpoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := later.Meta[checkpoint.MetaNotBitExact]; got != out.NotBitExact {
		t.Fatalf("the next checkpoint's %s is %q, want %q", checkpoint.MetaNotBitExact, got, out.NotBitExact)
	}
}

// TestDamagedCheckpointFallsBackToThePreviousGoodOne damages the run's last
// checkpoint in the ways a crash, a disk or a person can (a flipped bit, a
// torn write cut short, a file emptied) and checks that opening the run
// refuses it, names it and the reason, and restores the newest earlier
// checkpoint that is intact, bit for bit, skipping damaged ones between.
func TestDamagedCheckpointFallsBackToThePreviousGoodOne(t *testing.T) {
	damage := map[string]func([]byte) []byte{
		"bit flipped": func(b []byte) []byte { b[len(b)/2] ^= 0x10; return b },
		"torn write":  func(b []byte) []byte { return b[:len(b)/3] },
		"emptied":     func([]byte) []byte { return nil },
	}
	for name, f := range damage {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			r := newRig(t, root, nil)
			r.open(activities.OpenInput{})
			refs := r.checkpointEpochs(3)
			good, err := os.ReadFile(refs[1].URI)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range []int{3, 2} { // the last and the one before: back to epoch 1
				raw, err := os.ReadFile(refs[e].URI)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(refs[e].URI, f(raw), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			other := newRig(t, root, r.store)
			var out activities.OpenOutput
			other.must(other.a.OpenTrainer, activities.OpenInput{RunID: runID, Config: testConfig(), Epoch: 3, GlobalStep: 30, Resume: &refs[3]}, &out)
			if out.Fallback == nil || out.Fallback.Epoch != 1 || out.Epoch != 1 || out.GlobalStep != refs[1].GlobalStep || !out.Restored {
				t.Fatalf("open from a damaged epoch 3: %+v; want a restore of epoch 1 (global step %d)", out, refs[1].GlobalStep)
			}
			if out.Fallback.URI != refs[1].URI || out.Fallback.SHA256 != hexSHA(good) {
				t.Fatalf("fallback %s sha256 %s, want %s sha256 %s", out.Fallback.URI, out.Fallback.SHA256, refs[1].URI, hexSHA(good))
			}
			if !strings.Contains(out.Damaged, refs[3].URI) || !strings.Contains(out.Damaged, "corrupt checkpoint") {
				t.Fatalf("Damaged %q does not name %s as corrupt", out.Damaged, refs[3].URI)
			}
			if _, restores := other.backend.Counts(); restores != 1 {
				t.Fatalf("%d restores, want 1", restores)
			}
		})
	}
}

func hexSHA(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// envRequireRoot, set to 1 (CI sets it: it runs as root), makes a test
// that needs root's powers (mounting a tmpfs) fail where it cannot use
// them instead of skipping.
const envRequireRoot = "DQNFLOW_REQUIRE_ROOT"

// TestFailedCheckpointWriteRecordsNothing makes the checkpoint write fail
// the ways storage does (the directory is a file, the disk is full, the
// file system is read-only; the last two on a small tmpfs, which the test
// mounts when it runs as root, and skips otherwise unless
// DQNFLOW_REQUIRE_ROOT=1) and checks that the error names the file and the
// reason, that no row is recorded and no file or temporary file is left,
// and that the previous checkpoint is untouched.
func TestFailedCheckpointWriteRecordsNothing(t *testing.T) {
	mount := func(t *testing.T, dir string, opts string) {
		t.Helper()
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", opts, "tmpfs", dir).CombinedOutput(); err != nil {
			if os.Getenv(envRequireRoot) == "1" {
				t.Fatalf("%s=1: cannot mount a tmpfs on %s (euid %d): %v %s", envRequireRoot, dir, os.Geteuid(), err, out)
			}
			t.Skipf("cannot mount a tmpfs here (needs root; %s=1 makes this a failure): %v %s", envRequireRoot, err, out)
		}
		t.Cleanup(func() { exec.Command("umount", dir).Run() })
	}
	for _, tc := range []struct {
		name, want string
		setup      func(t *testing.T, runDir string)
	}{
		{"directory is a file", "not a directory", func(t *testing.T, runDir string) {
			if err := os.RemoveAll(runDir); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(runDir, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"disk full", "no space left on device", func(t *testing.T, runDir string) {
			mount(t, runDir, "size=64k")
			f, _ := os.Create(filepath.Join(runDir, "filler"))
			for {
				if _, err := f.Write(make([]byte, 4096)); err != nil {
					break
				}
			}
			f.Close()
		}},
		{"read-only file system", "read-only file system", func(t *testing.T, runDir string) {
			mount(t, runDir, "size=1m,ro")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			r, first := checkpointed(t, root, nil)
			before, err := os.ReadFile(first.Checkpoint.URI)
			if err != nil {
				t.Fatal(err)
			}
			// Epoch 2's checkpoint goes to a directory of its own, made to fail.
			cfg := testConfig()
			cfg.Checkpoint.Dir = "failing"
			r2 := newRig(t, root, r.store)
			r2.open(activities.OpenInput{Config: cfg, Epoch: 1, GlobalStep: first.Checkpoint.GlobalStep, Resume: &first.Checkpoint})
			runDir := filepath.Join(root, "failing", runID)
			if err := os.MkdirAll(runDir, 0o755); err != nil {
				t.Fatal(err)
			}
			tc.setup(t, runDir)
			r2.epoch(2)
			err = r2.do(r2.a.Checkpoint, activities.CheckpointInput{RunID: runID, Epoch: 2}, nil)
			want := filepath.Join(runDir, "epoch-000002.safetensors")
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("checkpoint on a failing disk: %v; want an error naming %s and %q", err, want, tc.want)
			}
			if _, err := r.store.GetCheckpoint(context.Background(), runID, 2); err == nil {
				t.Fatal("a checkpoint row was recorded for the failed write")
			}
			if entries, err := os.ReadDir(runDir); err == nil {
				for _, e := range entries {
					if e.Name() != "filler" {
						t.Errorf("left behind in %s: %s", runDir, e.Name())
					}
				}
			}
			after, err := os.ReadFile(first.Checkpoint.URI)
			if err != nil || !bytes.Equal(after, before) {
				t.Fatalf("the previous checkpoint changed: %v", err)
			}
		})
	}
}

// TestCheckpointRemovesWhatAKilledWriteLeft leaves in the run's checkpoint
// directory the temporary files of writes whose worker was killed: an old
// one of another epoch, and a fresh one of the epoch about to be written
// again (the worker killed in its write a moment ago, the run restored
// from the checkpoint before), beside a fresh one of another epoch (a
// write that may be in progress). The next checkpoint must remove the
// first two and keep the third.
func TestCheckpointRemovesWhatAKilledWriteLeft(t *testing.T) {
	root := t.TempDir()
	r, ck := checkpointed(t, root, nil)
	dir := filepath.Dir(ck.Checkpoint.URI)
	old := filepath.Join(dir, ".epoch-000004.safetensors.tmp-111")
	fresh := filepath.Join(dir, ".epoch-000003.safetensors.tmp-222")
	own := filepath.Join(dir, ".epoch-000002.safetensors.tmp-333")
	for _, p := range []string{old, fresh, own} {
		if err := os.WriteFile(p, []byte("torn"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chtimes(old, time.Now().Add(-time.Hour), time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	r.epoch(2)
	r.must(r.a.Checkpoint, activities.CheckpointInput{RunID: runID, Epoch: 2}, nil)
	if _, err := os.Stat(old); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the temporary file of a killed write is still there: %v", err)
	}
	if _, err := os.Stat(own); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the temporary file of a killed write of the same checkpoint is still there: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("the temporary file of a write in progress was removed: %v", err)
	}
}

// TestDamagedObjectFallsBackToThePreviousGoodOne is the fallback above in
// an S3 store (versitygw): the last two checkpoints' objects are replaced
// by copies with a bit flipped, and another worker, opening the same
// bucket, restores epoch 1, found by listing the run's objects.
func TestDamagedObjectFallsBackToThePreviousGoodOne(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	ctx := context.Background()
	open := func() *checkpoint.Store {
		s, err := checkpoint.OpenStore(ctx, srv.URL("runs"), checkpoint.Options{Buckets: bucket.OpenS3})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	r := newRig(t, t.TempDir(), nil)
	r.a.Checkpoints = open()
	r.open(activities.OpenInput{})
	refs := r.checkpointEpochs(3)
	c := srv.Client()
	key := func(uri string) string { return strings.TrimPrefix(uri, "s3://"+srv.Bucket+"/") }
	for _, e := range []int{3, 2} {
		got, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(srv.Bucket), Key: aws.String(key(refs[e].URI))})
		if err != nil {
			t.Fatalf("%s: %v", refs[e].URI, err)
		}
		raw, err := io.ReadAll(got.Body)
		got.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		raw[len(raw)/2] ^= 0x10
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(srv.Bucket), Key: aws.String(key(refs[e].URI)), Body: bytes.NewReader(raw)}); err != nil {
			t.Fatal(err)
		}
	}
	other := newRig(t, t.TempDir(), r.store)
	other.a.Checkpoints = open()
	var out activities.OpenOutput
	other.must(other.a.OpenTrainer, activities.OpenInput{RunID: runID, Config: testConfig(), Epoch: 3, GlobalStep: 30, Resume: &refs[3]}, &out)
	if out.Fallback == nil || out.Fallback.URI != refs[1].URI || out.Fallback.SHA256 != refs[1].SHA256 || out.Epoch != 1 || !out.Restored {
		t.Fatalf("open from a damaged epoch 3: %+v; want a restore of epoch 1 from %s", out, refs[1].URI)
	}
	if !strings.HasPrefix(refs[1].URI, "s3://"+srv.Bucket+"/runs/") || !strings.Contains(out.Damaged, refs[3].URI) {
		t.Fatalf("checkpoint URIs %s, damaged %q: want objects of the bucket, the damaged one named", refs[1].URI, out.Damaged)
	}
}
