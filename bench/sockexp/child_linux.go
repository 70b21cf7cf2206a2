package sockexp

import "syscall"

// childAttr asks the kernel to kill a server when the thread that
// started it exits, so a crashed benchmark leaves no server behind.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
