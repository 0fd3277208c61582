//go:build unix && !linux

package e2e

import "syscall"

// sysProcAttr puts a child in its own process group, so that it and its
// children can be signalled together.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
