//go:build !linux

package peers

// isTmpfs reports false: only Linux is asked for a tmpfs.
func isTmpfs(string) bool { return false }

// processAlive reports true: without Linux's signal 0, a directory is
// never taken for stale.
func processAlive(int) bool { return true }
