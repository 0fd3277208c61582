//go:build unix && !linux

package devstack

import (
	"os"
	"syscall"
)

// serverProcAttr puts the Temporal dev server in a process group of its
// own, so that stopping it stops its children. (Only Linux can have the
// kernel end it when dqnflow dies.)
func serverProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// terminateGroup asks p's process group to end.
func terminateGroup(p *os.Process) error { return syscall.Kill(-p.Pid, syscall.SIGTERM) }

// killGroup kills p's process group.
func killGroup(p *os.Process) error { return syscall.Kill(-p.Pid, syscall.SIGKILL) }
