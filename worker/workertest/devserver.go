// Package workertest starts a Temporal dev server for tests that need a
// real one: the pinned CLI (bin/temporal, or $DQNFLOW_TEMPORAL) on free
// local ports, never the default 7233, with an SQLite file in the test's
// temporary directory.
package workertest

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

	"github.com/dqnflow/dqnflow/internal/testproc"
	"github.com/dqnflow/dqnflow/worker"
)

// EnvBinary names the Temporal CLI binary; `make test` sets it.
const EnvBinary = "DQNFLOW_TEMPORAL"

// Binary returns the Temporal CLI: $DQNFLOW_TEMPORAL, else bin/temporal in
// the module root above the working directory, or "" when there is none.
func Binary() string { return testproc.Binary(EnvBinary, "temporal") }

// DevServer starts a dev server for the test and returns a client of its
// default namespace; both are stopped when the test ends. extraArgs are
// added to `temporal server start-dev` after worker.DevServerFlags. The
// test fails when no Temporal CLI is found (run `make temporal`), and is
// skipped under -short.
func DevServer(t testing.TB, extraArgs ...string) client.Client {
	t.Helper()
	_, c := DevServerAt(t, filepath.Join(t.TempDir(), "temporal.log"), extraArgs...)
	return c
}

// DevServerAt is DevServer for tests that start their own workers: it also
// returns the server's host:port, and keeps the server's output in logPath,
// whose end it prints if the test fails. A server that exits at start (a
// port taken by another test between picking and binding it) is started
// again on new ports (testproc.StartOnFreePorts).
func DevServerAt(t testing.TB, logPath string, extraArgs ...string) (string, client.Client) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a Temporal dev server; skipped under -short")
	}
	bin := Binary()
	if bin == "" {
		t.Fatalf("no Temporal CLI: run `make temporal` or set %s", EnvBinary)
	}
	dir := filepath.Dir(logPath)
	logger := log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	var c client.Client
	start := func(ports []int, attempt int) *exec.Cmd {
		db := "temporal.db"
		if attempt > 1 {
			db = fmt.Sprintf("temporal-%d.db", attempt)
		}
		args := append([]string{"server", "start-dev", "--headless",
			"--ip", "127.0.0.1", "--port", strconv.Itoa(ports[0]), "--http-port", strconv.Itoa(ports[1]),
			"--metrics-port", "0", "--db-filename", filepath.Join(dir, db), "--log-level", "warn"},
			append(worker.DevServerFlags(), extraArgs...)...)
		return exec.Command(bin, args...)
	}
	ready := func(p *testproc.Proc, ports []int) error {
		alive := func() error {
			if !p.Alive() {
				return fmt.Errorf("exited at start: %v", p.Cmd.ProcessState)
			}
			return nil
		}
		var err error
		if c, err = worker.DialWhenReady(context.Background(), client.Options{HostPort: addrOf(ports[0]), Logger: logger}, time.Minute, alive); err != nil {
			return err
		}
		if !testproc.Listens(p.Cmd.Process.Pid, ports[0]) {
			// Another server holds the port: this one will fail to bind it.
			c.Close()
			syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGTERM)
			<-p.Exited
			return fmt.Errorf("port %d answered, but another process listens on it", ports[0])
		}
		return nil
	}
	_, ports := testproc.StartOnFreePorts(t, "temporal", logPath, 2, start, ready)
	addr := addrOf(ports[0])
	t.Cleanup(c.Close)
	return addr, c
}

// addrOf is the dev server's host:port on the loopback address.
func addrOf(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
