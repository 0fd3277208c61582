package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// proc is a child process in a process group of its own, with stdout and
// stderr in one log file that the test prints when it fails.
type proc struct {
	name   string
	cmd    *exec.Cmd
	log    string
	exited chan struct{} // closed once the process has been waited for
}

// startProc starts bin with args and env, its output going to logPath. At
// the end of the test the process group is stopped (SIGTERM, then SIGKILL)
// and, if the test failed, the end of the log is printed.
func startProc(t *testing.T, name, logPath string, env []string, bin string, args ...string) *proc {
	t.Helper()
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start %s (%s): %v", name, bin, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, exited: make(chan struct{})}
	go func() {
		cmd.Wait()
		f.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		// The log as the failure found it, before the shutdown's own noise.
		var tail string
		if t.Failed() {
			tail = p.tail(24 << 10)
		}
		p.stop(10 * time.Second)
		if t.Failed() {
			t.Logf("--- %s (%s; %s): end of its output ---\n%s", name, strings.Join(cmd.Args, " "), cmd.ProcessState, tail)
		}
	})
	return p
}

// alive returns an error when the process has ended.
func (p *proc) alive() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s exited (%s); its output ends with:\n%s", p.name, p.cmd.ProcessState, p.tail(8<<10))
	default:
		return nil
	}
}

// kill sends SIGKILL to the process group and waits for the process.
func (p *proc) kill() error {
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill %s: %w", p.name, err)
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d) still runs 10 s after SIGKILL", p.name, p.cmd.Process.Pid)
	}
}

// stop asks the process group to end (SIGTERM) and kills it after grace.
func (p *proc) stop(grace time.Duration) {
	select {
	case <-p.exited:
		return
	default:
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		p.kill()
	}
}

// output returns the whole log so far.
func (p *proc) output() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// tail returns the last n bytes of the log.
func (p *proc) tail(n int) string {
	s := p.output()
	if len(s) > n {
		s = "[...]\n" + s[len(s)-n:]
	}
	return s
}

// waitFor calls check every interval until it reports done, and fails the
// test when it returns an error or when timeout passes; what says what was
// awaited.
func waitFor(t *testing.T, what string, timeout, interval time.Duration, check func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		done, err := check()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within %s", what, timeout)
		}
		time.Sleep(interval)
	}
}
