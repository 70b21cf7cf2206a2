package shmem

import (
	"errors"
	"math"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Futex operations (linux/futex.h). They are deliberately not
// FUTEX_PRIVATE_FLAG: waiters and wakers may be in different processes.
const (
	futexWait = 0
	futexWake = 1
)

// ErrTimeout is returned by Wait when the timeout passed without a wake-up.
var ErrTimeout = errors.New("shmem: futex wait timed out")

// Wait blocks while *addr == val, until a Wake on addr, a timeout or a
// spurious wake-up. It returns nil when woken or when *addr no longer
// holds val (checked first, and atomically by the kernel against a
// concurrent Wake); ErrTimeout when timeout passed; other errors only for
// bad arguments. A negative timeout waits without limit; timeout 0 only
// checks the value. Interrupted system calls are retried with the time
// that remains. As with every futex, a nil return does not promise that
// the value changed: callers re-check their condition in a loop.
//
// addr must be 4-byte aligned and, to meet waiters and wakers in other
// processes, inside a MAP_SHARED mapping such as Segment.Bytes (ordinary
// Go memory works within one process; the Go heap does not move objects).
// Wait blocks the calling goroutine's OS thread in the kernel.
func Wait(addr *uint32, val uint32, timeout time.Duration) error {
	if atomic.LoadUint32(addr) != val {
		return nil
	}
	var deadline time.Time
	if timeout >= 0 {
		deadline = time.Now().Add(timeout)
	}
	for {
		var ts *unix.Timespec
		if timeout >= 0 {
			left := time.Until(deadline)
			if left <= 0 {
				return ErrTimeout
			}
			t := unix.NsecToTimespec(left.Nanoseconds())
			ts = &t
		}
		_, _, e := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWait,
			uintptr(val), uintptr(unsafe.Pointer(ts)), 0, 0)
		switch e {
		case 0, unix.EAGAIN:
			return nil
		case unix.ETIMEDOUT:
			return ErrTimeout
		case unix.EINTR:
			continue
		default:
			return os.NewSyscallError("futex(FUTEX_WAIT)", e)
		}
	}
}

// Wake wakes at most n waiters blocked in Wait on addr, in this or any
// other process mapping the same memory, and returns how many it woke.
// n must be positive; n larger than math.MaxInt32 means all. Store the new
// value (atomically) before calling Wake, or a waiter that has not yet
// gone to sleep may sleep through it. addr has the requirements given at
// Wait.
func Wake(addr *uint32, n int) (int, error) {
	if n <= 0 {
		return 0, errors.New("shmem: futex wake: n must be positive")
	}
	if n > math.MaxInt32 {
		n = math.MaxInt32
	}
	r, _, e := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWake,
		uintptr(n), 0, 0, 0)
	if e != 0 {
		return 0, os.NewSyscallError("futex(FUTEX_WAKE)", e)
	}
	return int(r), nil
}
