//go:build !linux

package objexp

import "syscall"

// childAttr is nil off Linux (no parent-death signal).
func childAttr() *syscall.SysProcAttr { return nil }
