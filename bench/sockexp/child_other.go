//go:build !linux

package sockexp

import "syscall"

// childAttr is nil where the kernel cannot kill a server with its
// parent.
func childAttr() *syscall.SysProcAttr { return nil }
