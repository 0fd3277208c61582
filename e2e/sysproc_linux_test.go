package e2e

import "syscall"

// sysProcAttr puts a child in its own process group, so that it and its
// children can be signalled together, and kills it if the test process
// dies first (a test binary killed on timeout leaves no servers behind).
// Linux sends that signal when the thread that started the child exits,
// which the Go runtime does only for threads locked with LockOSThread;
// nothing in this test process locks one.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
