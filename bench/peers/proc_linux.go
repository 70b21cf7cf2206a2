package peers

import "syscall"

// sysProcAttr asks the kernel to kill a child when the thread that
// started it exits, so a crashed test leaves no server behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
