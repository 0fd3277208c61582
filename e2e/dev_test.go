package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/store"
	"github.com/dqnflow/dqnflow/trainer/trainertest"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestDevRunsOnSQLiteAndServesMetrics runs "dqnflow dev" with its metadata
// in an SQLite file (no PostgreSQL involved), trains a small run through
// the CLI, and checks that the run's rows are in the file, that the
// commands read them from there, and that the metrics endpoint dev prints
// serves the Temporal SDK's and the trainer's metrics.
func TestDevRunsOnSQLiteAndServesMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts dqnflow dev")
	}
	dir := t.TempDir()
	bin := dqnflowBinary(t)
	port := freePort(t)
	sqlite := filepath.Join(dir, ".dqnflow", "metadata.db")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DATABASE_URL=") && !strings.HasPrefix(kv, "TEMPORAL_ADDRESS=") {
			env = append(env, kv)
		}
	}
	env = append(env, "DATABASE_URL=sqlite:"+sqlite, "TEMPORAL_ADDRESS=127.0.0.1:"+strconv.Itoa(port),
		"DQNFLOW_TEMPORAL="+temporalBinary(t))
	dev := startProc(t, "dev", filepath.Join(dir, "dev.log"), env, bin, "dev", "--device", "cpu",
		"--port", strconv.Itoa(port), "--ui-port", strconv.Itoa(freePort(t)), "--metrics-addr", "127.0.0.1:0",
		"--db-file", filepath.Join(dir, "temporal.db"), "--checkpoint-dir", dir)
	waitFor(t, "dqnflow dev to come up", 2*time.Minute, 100*time.Millisecond, func() (bool, error) {
		if err := dev.alive(); err != nil {
			return false, err
		}
		return strings.Contains(dev.output(), "dqnflow dev is up"), nil
	})
	out := dev.output()
	if !strings.Contains(out, "metadata store: SQLite "+sqlite) {
		t.Errorf("dev does not say it keeps the metadata in %s:\n%s", sqlite, out)
	}
	m := regexp.MustCompile(`Prometheus metrics \(Temporal SDK and trainer\) at (http://\S+/metrics)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("dev printed no metrics address:\n%s", out)
	}

	cli := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := execCommand(ctx, bin, args...)
		cmd.Env = env
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("dqnflow %s: %v\n%s", strings.Join(args, " "), err, stderrOf(err))
		}
		return string(b)
	}
	cfg := trainertest.SmallConfig()
	cfg.Epochs, cfg.StepsPerEpoch = 2, 10
	raw, _ := json.Marshal(cfg)
	cfgPath := filepath.Join(dir, "run.json")
	if err := os.WriteFile(cfgPath, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	cli("run", "start", "--config", cfgPath, "--id", "on-sqlite")
	if w := cli("run", "watch", "on-sqlite"); !strings.Contains(w, "run on-sqlite completed: 2 epochs") {
		t.Errorf("run watch:\n%s", w)
	}
	var shown struct {
		Run    store.Run     `json:"run"`
		Epochs []store.Epoch `json:"epochs"`
	}
	if err := json.Unmarshal([]byte(cli("run", "show", "on-sqlite", "--json")), &shown); err != nil {
		t.Fatal(err)
	}
	if shown.Run.Status != store.StatusCompleted || len(shown.Epochs) != 2 {
		t.Errorf("run show on SQLite: status %s, %d epochs; want completed, 2", shown.Run.Status, len(shown.Epochs))
	}

	st, err := store.OpenSQLite(context.Background(), sqlite)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cks, err := st.ListCheckpoints(context.Background(), "on-sqlite")
	if err != nil || len(cks) != 2 {
		t.Errorf("the SQLite file holds %d checkpoints of the run (%v), want 2", len(cks), err)
	}

	// doctor sees everything dev started and passes (a missing GPU is a warning).
	doc := cli("doctor", "--checkpoint-dir", dir)
	for _, want := range []string{"ok    temporal ", "ok    temporal namespace", "ok    search attributes", "ok    workers on dqnflow-control",
		"ok    workers on dqnflow-gpu", "ok    metadata store         SQLite " + sqlite, "ok    checkpoint directory"} {
		if !strings.Contains(doc, want) {
			t.Errorf("doctor lacks %q:\n%s", want, doc)
		}
	}

	resp, err := http.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, re := range []string{
		`(?m)^dqnflow_train_steps_total\{backend="cpu",device="[^"]+"\} 20$`,
		`(?m)^dqnflow_epoch_seconds_count\{backend="cpu",device="[^"]+"\} 2$`,
		`(?m)^dqnflow_env_steps_per_second\{`,
		`(?m)^temporal_request_total\{`,
		`(?m)^temporal_activity_execution_latency_seconds_bucket\{`,
		`(?m)^temporal_workflow_completed_total\{.*workflow_type="TrainingRun"`,
	} {
		if !regexp.MustCompile(re).Match(body) {
			t.Errorf("metrics lack %s", re)
		}
	}
}

// execCommand is exec.CommandContext.
var execCommand = exec.CommandContext

// stderrOf returns the standard error an *exec.ExitError captured.
func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return ""
}
