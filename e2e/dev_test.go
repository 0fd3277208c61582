package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dqnflow/dqnflow/internal/testproc"
	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/store"
	"github.com/dqnflow/dqnflow/trainer/trainertest"
)

// devStack is a "dqnflow dev" process with its metadata in an SQLite
// file, on free ports, and the environment that points the CLI at it.
type devStack struct {
	dir, bin, sqlite string
	env              []string
	addr, ui         string // Temporal frontend host:port; UI base URL
	metricsURL       string
	proc             *proc
}

// startDev starts "dqnflow dev" (no PostgreSQL involved: DATABASE_URL
// names an SQLite file) and waits until it is up. A dev stack that exits
// before it is up (a port taken between testproc.FreePort and the bind,
// by another test's server) is started again on new ports, in a fresh
// directory, up to three times.
func startDev(t *testing.T) *devStack {
	t.Helper()
	var d *devStack
	testproc.StartAgain(t, "dqnflow dev", func(int) (bool, error) {
		var err error
		d, err = tryDev(t)
		return d.proc.alive() != nil, err
	})
	return d
}

// tryDev starts one "dqnflow dev" and waits until it is up or has exited.
func tryDev(t *testing.T) (*devStack, error) {
	t.Helper()
	d := &devStack{dir: t.TempDir(), bin: dqnflowBinary(t)}
	port, uiPort := testproc.FreePort(t), testproc.FreePort(t)
	d.addr, d.ui = "127.0.0.1:"+strconv.Itoa(port), "http://localhost:"+strconv.Itoa(uiPort)
	d.sqlite = filepath.Join(d.dir, ".dqnflow", "metadata.db")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DATABASE_URL=") && !strings.HasPrefix(kv, "TEMPORAL_ADDRESS=") {
			d.env = append(d.env, kv)
		}
	}
	d.env = append(d.env, "DATABASE_URL=sqlite:"+d.sqlite, "TEMPORAL_ADDRESS="+d.addr, "DQNFLOW_TEMPORAL="+temporalBinary(t))
	d.proc = startProc(t, "dev", filepath.Join(d.dir, "dev.log"), d.env, d.bin, "dev", "--device", "cpu",
		"--port", strconv.Itoa(port), "--ui-port", strconv.Itoa(uiPort), "--metrics-addr", "127.0.0.1:0",
		"--db-file", filepath.Join(d.dir, "temporal.db"), "--checkpoint-dir", d.dir)
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(d.proc.output(), "dqnflow dev is up") {
		if err := d.proc.alive(); err != nil {
			return d, err
		}
		if time.Now().After(deadline) {
			return d, errors.New("not up within 2m0s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if m := regexp.MustCompile(`Prometheus metrics \(Temporal SDK and trainer\) at (http://\S+/metrics)`).FindStringSubmatch(d.proc.output()); m != nil {
		d.metricsURL = m[1]
	}
	return d, nil
}

// TestDevRunsOnSQLiteAndServesMetrics runs "dqnflow dev" with its metadata
// in an SQLite file (no PostgreSQL involved), trains a small run through
// the CLI, and checks that the run's rows are in the file, that the
// commands read them from there, and that the metrics endpoint dev prints
// serves the Temporal SDK's and the trainer's metrics.
func TestDevRunsOnSQLiteAndServesMetrics(t *testing.T) {
	endToEnd(t, "dqnflow dev")
	d := startDev(t)
	dir, bin, env, sqlite := d.dir, d.bin, d.env, d.sqlite
	out := d.proc.output()
	if first, _, _ := strings.Cut(out, "\n"); !strings.HasPrefix(first, "metadata store: SQLite "+sqlite+" ") {
		t.Errorf("dev's first line does not say it keeps the metadata in %s (the README says it does):\n%s", sqlite, out)
	}
	if d.metricsURL == "" {
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
	cfgPath := writeConfig(t, filepath.Join(dir, "run.json"), cfg)
	cli("run", "start", "--config", cfgPath, "--id", "on-sqlite")
	if w := cli("run", "watch", "on-sqlite"); !strings.Contains(w, "run on-sqlite completed: 2 epochs") {
		t.Errorf("run watch:\n%s", w)
	}
	var shown struct {
		Run    metadata.Run     `json:"run"`
		Epochs []metadata.Epoch `json:"epochs"`
	}
	if err := json.Unmarshal([]byte(cli("run", "show", "on-sqlite", "--json")), &shown); err != nil {
		t.Fatal(err)
	}
	if shown.Run.Status != metadata.StatusCompleted || len(shown.Epochs) != 2 {
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

	resp, err := http.Get(d.metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// Every metric the Grafana dashboard queries is exported (device
	// memory only where a CUDA backend reports it).
	dash, err := os.ReadFile(filepath.Join("..", "docs", "grafana", "dqnflow-workers.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range regexp.MustCompile(`\b(?:dqnflow|temporal|process)_[a-z_]+`).FindAllString(string(dash), -1) {
		if strings.HasPrefix(name, "dqnflow_device_memory_") {
			continue
		}
		if !regexp.MustCompile(`(?m)^` + name + `[{ ]`).Match(body) {
			t.Errorf("the Grafana dashboard queries %s, which the worker does not export", name)
		}
	}
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
