package peers

import (
	"errors"

	"golang.org/x/sys/unix"
)

// isTmpfs reports whether dir is on a tmpfs (memory-backed) file system.
func isTmpfs(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && st.Type == unix.TMPFS_MAGIC
}

// processAlive reports whether a process pid exists (signal 0 reaches
// it, or it exists under another user).
func processAlive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}
