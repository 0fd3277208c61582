package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/data"
	"github.com/dqnflow/dqnflow/metadata"
)

// TestRunReadsDataOnlyFromTheWorkersDataRoots starts `dqnflow worker
// --data-root DIR` and two runs: one whose data.path names a planted
// .pgpass-style file outside DIR fails at its first activity with a
// non-retryable InvalidConfig error that names data.path, the root and how
// to add one, trains no epoch, and leaves the file's content in no worker
// log, run row or workflow history; one whose data.path names a file in
// DIR by a path relative to it completes. Before (issue 43), the file was
// opened and its first line landed in the run's row, the CLI output and
// the history.
func TestRunReadsDataOnlyFromTheWorkersDataRoots(t *testing.T) {
	endToEnd(t, "the Temporal dev server and a worker process")
	const secret = "pw-7c1e-never-echoed"
	s := newStack(t)
	root, private := filepath.Join(s.dir, "prices"), filepath.Join(s.dir, "private")
	for _, d := range []string{root, private} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	btc, err := data.Open("bundled:bitcoin_2024.csv")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "btc.csv"), btc, 0o644); err != nil {
		t.Fatal(err)
	}
	pgpass := filepath.Join(private, ".pgpass")
	if err := os.WriteFile(pgpass, []byte("db.internal:5432:*:alice:"+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w := s.startWorker("worker", "--data-root", root)
	if !strings.Contains(w.output(), "data roots "+root) {
		t.Errorf("the worker's start-up line does not name its data root %s:\n%s", root, w.tail(5))
	}
	ctx := context.Background()
	start := func(prefix, dataPath string) string {
		cfg := killConfig(filepath.Join(s.dir, "checkpoints"), faultSteps)
		cfg.Epochs, cfg.Data.Path = 1, dataPath
		id := prefix + "-" + randomHex(t, 4)
		s.startRun(t, id, cfg)
		return id
	}

	outside := start("e2e-outside", pgpass)
	began := time.Now()
	run := waitTerminalRow(t, s, outside, w)
	t.Logf("the run naming a file outside the root ended %v after it started", time.Since(began))
	err = s.client.GetWorkflow(ctx, outside, "").Get(ctx, nil)
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != activities.ErrTypeInvalidConfig {
		t.Fatalf("run %s ended with %v, want an %s failure", outside, err, activities.ErrTypeInvalidConfig)
	}
	for _, want := range []string{"config data.path", pgpass, root, "--data-root"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the run's failure does not say %q: %v", want, err)
		}
	}
	st := s.openStore(t)
	if eps, err := st.ListEpochs(ctx, outside); err != nil || len(eps) != 0 || run.Status != metadata.StatusFailed {
		t.Errorf("run row %s with %d epochs (%v); want failed before any epoch", run.Status, len(eps), err)
	}
	leaks := func(where string, b []byte) {
		t.Helper()
		if bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte("alice")) {
			t.Errorf("the planted file's content appears in %s", where)
		}
	}
	leaks("the worker's log", []byte(w.output()))
	runLeavesNoSecret(t, s, outside, nil, leaks)

	inside := start("e2e-inside", "btc.csv")
	if res := s.waitClosed(inside, 3*time.Minute, w); res.Status != metadata.StatusCompleted || res.Epochs != 1 {
		t.Fatalf("run %s on a file in the data root: %s after %d epochs", inside, res.Status, res.Epochs)
	}
}
