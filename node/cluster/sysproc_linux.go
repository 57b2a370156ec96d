package cluster

import "syscall"

// sysProcAttr puts each node in its own process group, so that a Ctrl-C at
// the terminal reaches only the harness, which then kills the nodes by PID;
// and has the kernel kill a node if the harness itself dies, so that even a
// SIGKILLed harness leaves no nodes behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
