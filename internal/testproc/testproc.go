// Package testproc runs the server processes that tests start for real
// (the Temporal dev server, the S3 server): it finds their binary, picks a
// free local port, and starts a process in a process group of its own that
// dies with the test and, when the test fails, shows the end of its output.
package testproc

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Binary returns a helper binary: $env when set, else bin/name in the
// module root above the working directory, or "" when there is none.
func Binary(env, name string) string {
	if p := os.Getenv(env); p != "" {
		return p
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, "bin", name)
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

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Proc is a started helper process.
type Proc struct {
	Cmd *exec.Cmd
	// Exited is closed once the process has exited.
	Exited <-chan struct{}
}

// Alive reports whether the process is still running.
func (p *Proc) Alive() bool {
	select {
	case <-p.Exited:
		return false
	default:
		return true
	}
}

// tailBytes is how much of a failed test's helper output is shown.
const tailBytes = 8 << 10

// Start starts cmd with its output in the file logPath, in a process
// group of its own that gets SIGTERM when this process dies. When the
// test ends the group gets SIGTERM, then SIGKILL after 10 s; if the test
// failed, the last 8 KiB of the output (as it was before the stop) are
// logged under label.
func Start(t testing.TB, label string, cmd *exec.Cmd, logPath string) *Proc {
	t.Helper()
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); logFile.Close(); close(exited) }()
	t.Cleanup(func() {
		var tail []byte
		if t.Failed() {
			tail, _ = os.ReadFile(logPath)
			tail = tail[max(0, len(tail)-tailBytes):]
		}
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if t.Failed() {
			t.Logf("--- %s (%s): end of its output ---\n%s", label, strings.Join(cmd.Args, " "), tail)
		}
	})
	return &Proc{Cmd: cmd, Exited: exited}
}
