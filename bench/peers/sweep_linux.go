package peers

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// processesIn returns the running processes (zombies left out) whose
// working directory is dir or below it, or was before it was removed.
// PostgreSQL's processes work in their data directory, and its backends
// leave the server's process group (setsid), so this is how all of a
// server's processes are found.
func processesIn(dir string) []int {
	var pids []int
	links, _ := filepath.Glob("/proc/[0-9]*/cwd")
	for _, l := range links {
		cwd, err := os.Readlink(l)
		if err != nil {
			continue
		}
		cwd = strings.TrimSuffix(cwd, " (deleted)")
		if cwd != dir && !strings.HasPrefix(cwd, dir+"/") {
			continue
		}
		pid, err := strconv.Atoi(strings.Split(l, "/")[2])
		if err == nil && !ended(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// ended reports whether pid has ended (gone, or a zombie waiting for its
// parent), from /proc/PID/stat.
func ended(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// "pid (comm) state …": comm may hold spaces and ')'.
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || len(b) < i+3 || b[i+2] == 'Z' || b[i+2] == 'X'
}

// killProcessesIn kills the processes working in dir (processesIn) and
// waits up to d until none is left, reporting whether none is.
func killProcessesIn(dir string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		pids := processesIn(dir)
		if len(pids) == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// removeOrphanSegments removes the System V shared memory segments that
// one of creators made and no process has attached any more: what a
// PostgreSQL server that did not shut down leaves (the next server on the
// same data directory would remove it; none comes).
func removeOrphanSegments(creators ...int) {
	b, err := os.ReadFile("/proc/sysvipc/shm")
	if err != nil {
		return
	}
	// key shmid perms size cpid lpid nattch …
	for _, l := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(l)
		if len(f) < 7 {
			continue
		}
		id, errID := strconv.Atoi(f[1])
		cpid, errC := strconv.Atoi(f[4])
		if errID != nil || errC != nil || f[6] != "0" || !slices.Contains(creators, cpid) {
			continue
		}
		_, _ = unix.SysvShmCtl(id, unix.IPC_RMID, nil)
	}
}
