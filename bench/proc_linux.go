package bench

import "syscall"

// childAttr asks the kernel to kill a child server when the thread that
// started it exits, so a crashed benchmark leaves no node behind.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
