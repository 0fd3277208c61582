package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/config"
	"github.com/dqnflow/dqnflow/data"
	"github.com/dqnflow/dqnflow/errtext"
	"github.com/dqnflow/dqnflow/metadata"
	"github.com/dqnflow/dqnflow/trainer/faults"
)

// recordBound is how long a run that fails deterministically may take from
// its start to its terminal row: seconds of work (a session, the data, one
// step), never a heartbeat timeout or a retry of a write that cannot
// succeed (a minute would hide either).
const recordBound = 45 * time.Second

// TestFailuresReachTheRecord runs real TrainingRuns (the dqnflow worker
// binary, the Temporal dev server, PostgreSQL) that fail with error text
// no boundary took before: a UTF-16 data file, whose error quoted invalid
// UTF-8 and NULs; an injected error with a NUL, with invalid UTF-8, with a
// megabyte of text (trainer/faults' text); and a store that refuses a
// write with a permanent SQLSTATE (a trigger raising 22023). Each must end
// with its own failure type in the workflow's failure, on the first
// attempt (no activity timeout, one OpenTrainer, no recovery), and a
// terminal runs row whose error is valid UTF-8, NUL-free and at most
// errtext.Limit bytes, within recordBound; the worker's log stays valid
// UTF-8 with bounded lines. Before the fix the UTF-16 run ended after 6.3
// minutes as "lost its trainer 6 times", and the NUL run retried its
// status write for 29 minutes and kept the row running.
func TestFailuresReachTheRecord(t *testing.T) {
	endToEnd(t, "the Temporal dev server and worker processes")
	s := newStack(t)
	utf16Path := writeUTF16CSV(t, s.dir)
	for _, c := range []struct {
		name   string
		plan   string                                  // the worker's fault plan
		config func(cfg *config.RunConfig)             // changes to killConfig
		setup  func(t *testing.T, s *stack, id string) // before the run starts
		want   string                                  // the workflow failure's type
		text   string                                  // in the row's error
	}{
		{name: "utf-16 data file", want: activities.ErrTypeBadData, text: "UTF-16 (little-endian) text",
			config: func(cfg *config.RunConfig) { cfg.Data.Path = utf16Path }},
		{name: "nul byte", plan: "nan-on-train=1,text=610062", want: activities.ErrTypeNonFinite, text: `text: a\x00b`},
		{name: "invalid utf-8", plan: "nan-on-train=1,text=636166e920c328", want: activities.ErrTypeNonFinite, text: `text: caf\xe9 \xc3(`},
		{name: "1 MiB of text", plan: "nan-on-train=1,text=41*1048576", want: activities.ErrTypeNonFinite, text: " bytes cut) ... "},
		{name: "store refuses a write", want: activities.ErrTypeStoreRejected, text: "SQLSTATE 22023", setup: refuseDevice},
	} {
		t.Run(c.name, func(t *testing.T) {
			var env []string
			if c.plan != "" {
				env = []string{faults.EnvPlan + "=" + c.plan}
			}
			// The UTF-16 file lies in the stack's directory: the worker's data root.
			w := s.startWorkerEnv("worker-"+strings.ReplaceAll(c.name, " ", "-"), env, "--data-root", s.dir)
			defer w.stop(10 * time.Second)
			cfg := killConfig(filepath.Join(s.dir, "checkpoints"), faultSteps)
			if c.config != nil {
				c.config(&cfg)
			}
			id := "e2e-record-" + randomHex(t, 4)
			if c.setup != nil {
				c.setup(t, s, id)
			}
			start := time.Now()
			s.startRun(t, id, cfg)
			// A run still open when its case ends (on a broken build) must
			// not go on to the next case's worker.
			defer s.client.TerminateWorkflow(context.Background(), id, "", "its test case ended")
			row := waitTerminalRow(t, s, id, w)
			tookRow := time.Since(start)
			err := s.client.GetWorkflow(context.Background(), id, "").Get(context.Background(), nil)
			var ae *temporal.ApplicationError
			if !errors.As(err, &ae) || ae.Type() != c.want {
				t.Errorf("run %s failed with %v; want a %s failure", id, err, c.want)
			}
			if row.Status != metadata.StatusFailed || !strings.Contains(row.Error, c.text) {
				t.Errorf("row: status %s, error %.300q; want failed, naming %q", row.Status, row.Error, c.text)
			}
			if !utf8.ValidString(row.Error) || strings.ContainsRune(row.Error, 0) || len(row.Error) > errtext.Limit {
				t.Errorf("row error of %d bytes is not valid, NUL-free text within %d bytes: %.300q", len(row.Error), errtext.Limit, row.Error)
			}
			opens, timeouts := attempts(t, s, id)
			if opens != 1 || timeouts != 0 {
				t.Errorf("history: %d OpenTrainer attempts, %d activity timeouts; want 1 and 0 (the failure on its first attempt, no recovery)", opens, timeouts)
			}
			checkLog(t, w.output())
			if tookRow > recordBound {
				t.Errorf("the terminal row came %v after the start; want within %v", tookRow, recordBound)
			}
			t.Logf("%s: %s failure, terminal row %.1f s after the start; row error %d bytes: %.300q",
				c.name, c.want, tookRow.Seconds(), len(row.Error), row.Error)
		})
	}
}

// writeUTF16CSV writes the head of a bundled CSV as UTF-16LE with a byte
// order mark (a spreadsheet's "Unicode text") and returns its path.
func writeUTF16CSV(t *testing.T, dir string) string {
	t.Helper()
	raw, err := data.Open("bundled:bitcoin_2024.csv")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfterN(string(raw), "\n", 200)
	text := strings.Join(lines[:len(lines)-1], "")
	b := []byte{0xff, 0xfe}
	for _, u := range utf16.Encode([]rune(text)) {
		b = binary.LittleEndian.AppendUint16(b, u)
	}
	path := filepath.Join(dir, "utf16.csv")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// refuseDevice makes the stack's database refuse run id's device record
// (SetRunDevice, written once the trainer is open) with SQLSTATE 22023,
// invalid_parameter_value: a write that fails the same way on every
// attempt. The trigger is created after the worker applied the migrations.
func refuseDevice(t *testing.T, s *stack, id string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `
		CREATE FUNCTION refuse_device() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			RAISE EXCEPTION 'the test refuses device % of run %', NEW.device, NEW.run_id USING ERRCODE = '22023';
		END $$;
		CREATE TRIGGER refuse_device BEFORE UPDATE OF backend ON runs FOR EACH ROW
			WHEN (NEW.run_id = '`+id+`') EXECUTE FUNCTION refuse_device();`); err != nil {
		t.Fatal(err)
	}
}

// waitTerminalRow waits, within recordBound plus a margin for a loaded
// machine, until run id's workflow has closed and its row has a terminal
// status, and returns the row.
func waitTerminalRow(t *testing.T, s *stack, id string, w *proc) metadata.Run {
	t.Helper()
	ctx := context.Background()
	st := s.openStore(t)
	var row metadata.Run
	waitFor(t, "run "+id+" to end with a terminal row", 2*recordBound, 100*time.Millisecond, func() (bool, error) {
		if err := w.alive(); err != nil {
			return false, err
		}
		_, closed := s.pending(ctx, id)
		if !errors.Is(closed, errWorkflowClosed) {
			return false, nil
		}
		// A run writes its row's last status before its workflow closes.
		r, err := st.GetRun(ctx, id)
		if errors.Is(err, metadata.ErrNotFound) {
			return false, fmt.Errorf("%v, and it has no row", closed)
		}
		row = r
		return err == nil && r.Status.Terminal(), err
	})
	return row
}

// attempts counts run id's OpenTrainer attempts (started events) and its
// activity timeouts.
func attempts(t *testing.T, s *stack, id string) (opens, timeouts int) {
	t.Helper()
	names := map[int64]string{}
	for _, ev := range history(t, s.client, id) {
		switch ev.GetEventType() {
		case enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			names[ev.GetEventId()] = ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
		case enums.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			a := ev.GetActivityTaskStartedEventAttributes()
			if names[a.GetScheduledEventId()] == "OpenTrainer" {
				opens += int(a.GetAttempt())
			}
		case enums.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
			timeouts++
		}
	}
	return opens, timeouts
}

// maxLogLine bounds a worker log line: a failure's chain of causes, each
// level at most errtext.Limit, and the SDK's fields.
const maxLogLine = 64 << 10

// checkLog checks that a worker's log is valid UTF-8 without NULs and
// with no line over maxLogLine.
func checkLog(t *testing.T, log string) {
	t.Helper()
	if !utf8.ValidString(log) || strings.ContainsRune(log, 0) {
		i := strings.IndexFunc(log, func(r rune) bool { return r == utf8.RuneError || r == 0 })
		t.Errorf("the worker log is not valid, NUL-free text: at byte %d: %.200q", i, log[max(0, i-100):])
	}
	for i, line := range strings.Split(log, "\n") {
		if len(line) > maxLogLine {
			t.Errorf("worker log line %d is %d bytes, over %d: %.200q", i+1, len(line), maxLogLine, line)
		}
	}
}

// TestCLIErrorIsCleanText runs the dqnflow binary with a file name of
// invalid UTF-8, a terminal escape and 10 KB of letters: its error on
// stderr names the file as errtext.Clean shows it, within errtext.Limit
// bytes, and never writes the raw bytes to the terminal.
func TestCLIErrorIsCleanText(t *testing.T) {
	name := filepath.Join(t.TempDir(), "bad\xff\xfe\x1b[2J"+strings.Repeat("a", 10000)+".safetensors")
	cmd := exec.Command(dqnflowBinary(t), "checkpoint", "verify", name)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("dqnflow checkpoint verify exited with %v; want status 1\n%s", err, stderr.String())
	}
	out := strings.TrimSuffix(stderr.String(), "\n")
	if !utf8.ValidString(out) || strings.ContainsAny(out, "\x1b\x00") || len(out) > errtext.Limit+len("dqnflow checkpoint: ") {
		t.Errorf("stderr of %d bytes is not clean, bounded text: %.300q", len(out), out)
	}
	if !strings.Contains(out, `bad\xff\xfe\x1b[2Jaaa`) || !strings.Contains(out, " bytes cut) ... ") {
		t.Errorf("stderr does not show the name's bytes as escapes, cut: %.300q", out)
	}
}
