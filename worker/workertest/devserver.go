// Package workertest starts a Temporal dev server for tests that need a
// real one: the pinned CLI (bin/temporal, or $DQNFLOW_TEMPORAL) on free
// local ports, never the default 7233, with an SQLite file in the test's
// temporary directory.
package workertest

import (
	"context"
	"errors"
	"fmt"
	"io"
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

	"github.com/dqnflow/dqnflow/worker"
)

// EnvBinary names the Temporal CLI binary; `make test` sets it.
const EnvBinary = "DQNFLOW_TEMPORAL"

// Binary returns the Temporal CLI: $DQNFLOW_TEMPORAL, else bin/temporal in
// the module root above the working directory, or "" when there is none.
func Binary() string {
	if p := os.Getenv(EnvBinary); p != "" {
		return p
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, "bin", "temporal")
			if st, err := os.Stat(p); err == nil && !st.IsDir() {
				return p
			}
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// DevServer starts a dev server for the test and returns a client of its
// default namespace; both are stopped when the test ends. extraArgs are
// added to `temporal server start-dev` after worker.DevServerFlags. The
// test fails when no Temporal CLI is found (run `make temporal`), and is
// skipped under -short.
func DevServer(t testing.TB, extraArgs ...string) client.Client {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a Temporal dev server; skipped under -short")
	}
	bin := Binary()
	if bin == "" {
		t.Fatalf("no Temporal CLI: run `make temporal` or set %s", EnvBinary)
	}
	port, httpPort := freePort(t), freePort(t)
	args := append([]string{"server", "start-dev", "--headless",
		"--ip", "127.0.0.1", "--port", strconv.Itoa(port), "--http-port", strconv.Itoa(httpPort),
		"--metrics-port", "0", "--db-filename", filepath.Join(t.TempDir(), "temporal.db"), "--log-level", "error"},
		append(worker.DevServerFlags(), extraArgs...)...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})

	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	logger := log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	deadline := time.Now().Add(60 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			t.Fatalf("temporal dev server exited at start: %v", cmd.ProcessState)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c, err := client.DialContext(ctx, client.Options{HostPort: addr, Logger: logger})
		if err == nil {
			if _, err = c.CheckHealth(ctx, &client.CheckHealthRequest{}); err == nil {
				cancel()
				t.Cleanup(c.Close)
				return c
			}
			c.Close()
		}
		cancel()
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal(errors.Join(fmt.Errorf("temporal dev server at %s did not answer within 60 s", addr), last))
	return nil
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
