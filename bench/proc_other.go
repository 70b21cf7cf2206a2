//go:build !linux

package bench

import "syscall"

// childAttr: no parent-death signal outside Linux.
func childAttr() *syscall.SysProcAttr { return nil }
