package e2e

import (
	"bytes"
	"context"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/metadata"
)

// TestDatabasePasswordIsNeverLoggedOrStored runs a worker whose
// DATABASE_URL carries a password and checks that, after a run, the
// password is in none of what the run leaves behind: the worker's log,
// the run's row (config, error), the checkpoint files, and the workflow's
// history on the Temporal server (inputs, results, heartbeats, failures).
func TestDatabasePasswordIsNeverLoggedOrStored(t *testing.T) {
	endToEnd(t, "the Temporal dev server and a worker process")
	const secret = "pw-9f3c-never-logged"
	s := newStack(t)
	u, err := url.Parse(s.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), secret) // the test server trusts local connections, password or not
	w := s.startWorkerEnv("worker", []string{"DATABASE_URL=" + u.String()})
	cfg := killConfig(filepath.Join(s.dir, "checkpoints"), faultSteps)
	cfg.Epochs = 2
	runID := "e2e-secret-" + randomHex(t, 4)
	s.startRun(t, runID, cfg)
	if res := s.waitClosed(runID, 3*time.Minute, w); res.Status != metadata.StatusCompleted {
		t.Fatalf("run %s: %s", runID, res.Status)
	}
	leaks := func(where string, b []byte) {
		t.Helper()
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("the database password appears in %s", where)
		}
	}
	leaks("the worker's log", []byte(w.output()))
	runLeavesNoSecret(t, s, runID, checkCheckpointRows(t, s, runID, cfg), leaks)
}

// runLeavesNoSecret passes to leaks what a finished run left behind: its
// row's stored config and error, the checkpoints of rows (files or
// objects), and the workflow's history on the Temporal server.
func runLeavesNoSecret(t *testing.T, s *stack, runID string, rows []metadata.CheckpointRecord, leaks func(where string, b []byte)) {
	t.Helper()
	ctx := context.Background()
	st := s.openStore(t)
	run, err := st.GetRun(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	leaks("the run's stored config", run.Config)
	leaks("the run's error", []byte(run.Error))
	for _, r := range rows {
		b, err := s.readBlob(r.URI)
		if err != nil {
			t.Fatal(err)
		}
		leaks("checkpoint "+r.URI, b)
	}
	var hist strings.Builder
	for _, ev := range history(t, s.client, runID) {
		hist.WriteString(ev.String())
	}
	leaks("the workflow history", []byte(hist.String()))
}
