// Package testproc runs the server processes that tests start for real
// (the Temporal dev server, the S3 server): it finds their binary, picks a
// free local port, and starts a process in a process group of its own that
// dies with the test and, when the test fails, shows the end of its output.
package testproc

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
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

// startAttempts is how many times StartAgain tries a server that exits
// before it is ready.
const startAttempts = 3

// StartAgain runs try (attempt 1, 2, …) until it returns nil, at most
// startAttempts times: for a server on ports fresh from FreePort, which
// are free only until someone binds them. Servers such as the Temporal dev
// server pick their internal ports the same way, so tests that start
// several at once can collide. try returns the attempt's error and whether
// its process has exited; an attempt whose process still runs, or the
// last one, fails the test. try starts each attempt on new ports.
func StartAgain(t testing.TB, label string, try func(attempt int) (exited bool, err error)) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		exited, err := try(attempt)
		if err == nil {
			return
		}
		if !exited || attempt == startAttempts {
			t.Fatalf("%s (attempt %d of %d): %v", label, attempt, startAttempts, err)
		}
		t.Logf("%s exited before it was ready (attempt %d of %d); starting it again on new ports: %v", label, attempt, startAttempts, err)
	}
}

// StartOnFreePorts starts a server on n ports fresh from FreePort (again
// on new ones if it exits at start, StartAgain): cmd builds its command
// for the ports and the attempt, and ready waits until it answers,
// returning nil then, or an error. The attempts' output goes to logPath,
// logPath.2, …; the end of an exited attempt's output is in its error.
func StartOnFreePorts(t testing.TB, label, logPath string, n int, cmd func(ports []int, attempt int) *exec.Cmd, ready func(p *Proc, ports []int) error) (*Proc, []int) {
	t.Helper()
	var p *Proc
	var ports []int
	StartAgain(t, label, func(attempt int) (bool, error) {
		ports = make([]int, n)
		for i := range ports {
			ports[i] = FreePort(t)
		}
		path := logPath
		if attempt > 1 {
			path = fmt.Sprintf("%s.%d", logPath, attempt)
		}
		p = Start(t, label, cmd(ports, attempt), path)
		err := ready(p, ports)
		if err == nil || p.Alive() {
			return false, err
		}
		<-p.Exited
		out, _ := os.ReadFile(path)
		return true, fmt.Errorf("on ports %v: %w; end of its output:\n%s", ports, err, out[max(0, len(out)-2<<10):])
	})
	return p, ports
}

// Listens reports whether process pid holds a TCP socket listening on
// port (any address), from /proc on Linux; elsewhere it reports true. A
// client that reaches a port this server was meant to bind may be talking
// to another test's server that got there first; this tells them apart.
func Listens(pid, port int) bool {
	if runtime.GOOS != "linux" {
		return true
	}
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			if len(f) < 10 || f[3] != "0A" { // 0A: LISTEN
				continue
			}
			_, hexPort, ok := strings.Cut(f[1], ":")
			if p, err := strconv.ParseUint(hexPort, 16, 16); ok && err == nil && int(p) == port {
				inodes["socket:["+f[9]+"]"] = true
			}
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return false
	}
	for _, fd := range fds {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && inodes[l] {
			return true
		}
	}
	return false
}
