//go:build linux

package nic

import (
	"sync"

	"golang.org/x/sys/unix"
)

// A solo QP publishes a completion by storing the CQ's tail and then
// loading its arm word; a consumer arms by storing the arm word and then
// polls the tail. That is Dekker's pattern, and each side needs its store
// ordered before its load — on amd64 a locked instruction, several
// nanoseconds on every completion. On a single-threaded CQ the fence moves
// to the rare side instead: ReqNotify, after storing the arm word, runs
// membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), which makes every running
// thread of the process execute a full barrier. Any producer whose tail
// store came before that barrier has it visible to the poll that follows;
// any producer past the barrier loads the arm word after it and sees the
// CQ armed. The producer's own store is then a plain store (storeRel), as
// in userspace RCU's membarrier flavour.

// Commands of membarrier(2).
const (
	membarrierQuery                    = 0
	membarrierPrivateExpedited         = 1 << 3
	membarrierRegisterPrivateExpedited = 1 << 4
)

var (
	membarrierOnce  sync.Once
	membarrierReady bool
)

// membarrierAvailable registers the process for private expedited
// membarriers, once, and reports whether they can be used.
func membarrierAvailable() bool {
	membarrierOnce.Do(func() {
		const need = membarrierPrivateExpedited | membarrierRegisterPrivateExpedited
		r, _, e := unix.Syscall(unix.SYS_MEMBARRIER, membarrierQuery, 0, 0)
		if e != 0 || r&need != need {
			return
		}
		if _, _, e := unix.Syscall(unix.SYS_MEMBARRIER, membarrierRegisterPrivateExpedited, 0, 0); e != 0 {
			return
		}
		membarrierReady = true
	})
	return membarrierReady
}

// membarrier makes every running thread of the process execute a full
// memory barrier before it returns. It is only called once
// membarrierAvailable reported true, so it cannot fail.
func membarrier() {
	_, _, _ = unix.Syscall(unix.SYS_MEMBARRIER, membarrierPrivateExpedited, 0, 0)
}
