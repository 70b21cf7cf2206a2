package objexp

import "syscall"

// childAttr asks the kernel to kill a store when the thread that started
// it exits, so a crashed benchmark leaves no store behind.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
