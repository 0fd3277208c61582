package devstack

import (
	"os"
	"syscall"
)

// serverProcAttr puts the Temporal dev server in a process group of its
// own (so that stopping it stops its children) and has the kernel send it
// SIGTERM if dqnflow dies first.
func serverProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

// terminateGroup asks p's process group to end.
func terminateGroup(p *os.Process) error { return syscall.Kill(-p.Pid, syscall.SIGTERM) }

// killGroup kills p's process group.
func killGroup(p *os.Process) error { return syscall.Kill(-p.Pid, syscall.SIGKILL) }
