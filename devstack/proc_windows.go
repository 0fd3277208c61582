package devstack

import (
	"os"
	"syscall"
)

// serverProcAttr is the default on Windows: the dev server is one process.
func serverProcAttr() *syscall.SysProcAttr { return nil }

// terminateGroup ends p; Windows has no SIGTERM, so it is killed.
func terminateGroup(p *os.Process) error { return p.Kill() }

// killGroup kills p.
func killGroup(p *os.Process) error { return p.Kill() }
