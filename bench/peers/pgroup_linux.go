package peers

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// ownGroup starts a command as the leader of a process group of its own,
// so that killGroup reaches the processes it starts too (initdb's
// bootstrap backend, a server's backends), and has the end of its
// context kill the whole group.
func ownGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}

// killGroup kills every process of the group pgid that is still running
// and waits up to d until none runs (zombies not reaped yet count as
// gone). It reports whether none runs. The group is only signalled while
// a member runs, so a pgid reused by another group is never hit.
func killGroup(pgid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for groupRunning(pgid) {
		if time.Now().After(deadline) {
			return false
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// groupRunning reports whether some process of group pgid runs (is not a
// zombie), from /proc/PID/stat.
func groupRunning(pgid int) bool {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// "pid (comm) state ppid pgrp …": comm may hold spaces and ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		fields := bytes.Fields(b[i+1:])
		if len(fields) < 3 || string(fields[0]) == "Z" || string(fields[0]) == "X" {
			continue
		}
		if g, err := strconv.Atoi(string(fields[2])); err == nil && g == pgid {
			return true
		}
	}
	return false
}
