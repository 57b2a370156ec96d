//go:build unix && !linux

package cluster

import "syscall"

// sysProcAttr puts each node in its own process group, so that a Ctrl-C at
// the terminal reaches only the harness, which then kills the nodes by PID.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
