package shmem

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"
)

// LockSize is the number of bytes a Lock occupies in shared memory; it
// must start at an 8-byte aligned offset.
const LockSize = 16

// Tuning of the contended path of Lock.Lock.
const (
	// spinTight is the number of immediate retries before yielding.
	spinTight = 4
	// spinTries bounds the retries (tight ones, then with
	// runtime.Gosched) before parking in the kernel.
	spinTries = 32
	// parkSlice bounds one futex sleep, so that a lost wake-up or a dead
	// owner costs at most about this long.
	parkSlice = time.Millisecond
	// checkAfter is how long an owner must hold the lock, as seen by a
	// waiter, before the waiter checks whether the owner is alive; and
	// the interval between later checks.
	checkAfter = time.Millisecond
)

var (
	// ErrOwnerDied is returned (wrapped, test with errors.Is) by Lock.Lock
	// when the previous holder died while holding the lock. The caller
	// then HOLDS the lock: it must bring the data the lock guards back to
	// a consistent state and call Unlock, as with pthread's EOWNERDEAD.
	ErrOwnerDied = errors.New("shmem: lock owner died; lock taken over")
	// ErrNotOwner is returned (wrapped) by Unlock when the calling
	// process does not hold the lock. The lock is left unchanged.
	ErrNotOwner = errors.New("shmem: unlock of a lock not held by this process")
)

// Lock is a mutual exclusion lock that lives in shared memory and is
// shared by processes: a 16-byte overlay obtained with LockAt on memory
// every participant maps (a Segment), or a zero Lock in ordinary memory
// for use within one process. Zero bytes are an unlocked Lock.
//
// A Lock is held by a process, not by a goroutine (like sync.Mutex, any
// goroutine of the holding process may unlock it). It is robust: when the
// holding process dies, the next Lock.Lock takes it over and reports
// ErrOwnerDied. Memory layout, all fields accessed only atomically:
//
//	offset 0  uint64  owner: the holder's ProcessID, 0 when unlocked
//	offset 8  uint32  seq: futex word, bumped by Unlock when waiters park
//	offset 12 uint32  waiters: number of waiters parked, in any process
type Lock struct {
	owner   atomic.Uint64
	seq     uint32
	waiters uint32
}

// LockAt returns the Lock overlaid on the first LockSize bytes of b, which
// must start at an 8-byte aligned address (an 8-aligned offset into a
// Segment) and hold at least LockSize bytes; otherwise the error wraps
// ErrMisaligned. LockAt does not initialize the memory: a fresh segment is
// zero, which is unlocked, and other processes may already be using it.
func LockAt(b []byte) (*Lock, error) {
	if err := checkWord(b, 8); err != nil {
		return nil, err
	}
	if len(b) < LockSize {
		return nil, fmt.Errorf("%w: %d bytes, a Lock needs %d", ErrMisaligned, len(b), LockSize)
	}
	return (*Lock)(unsafe.Pointer(&b[0])), nil
}

// TryLock acquires the lock if it is free and reports whether it did. It
// is one compare-and-swap; it never waits and never takes over a lock
// from a dead owner (Lock does that).
func (l *Lock) TryLock() bool {
	return l.owner.CompareAndSwap(0, uint64(Self()))
}

// TryLockAs is TryLock for a caller that knows its ProcessID (Self()),
// saving the lookup on a hot path. Passing another process's id is a bug.
func (l *Lock) TryLockAs(me uint64) bool {
	return l.owner.CompareAndSwap(0, me)
}

// Lock acquires the lock, waiting while another process (or another
// goroutine of this one) holds it. It returns
//
//   - nil: the lock is held;
//   - an error matching ErrOwnerDied: the lock is held, taken over from a
//     holder that died; the guarded data may be inconsistent;
//   - ctx.Err(): the context ended first; the lock is not held.
//
// The uncontended path is one compare-and-swap. Under contention Lock
// retries briefly, yielding the processor, then parks on a futex in
// slices of about a millisecond; it notices a dead owner, and a cancelled
// ctx, within a few slices.
func (l *Lock) Lock(ctx context.Context) error {
	me := uint64(Self())
	if l.owner.CompareAndSwap(0, me) {
		return nil
	}
	return l.lockSlow(ctx, me)
}

func (l *Lock) lockSlow(ctx context.Context, me uint64) error {
	for i := range spinTries {
		if i >= spinTight {
			runtime.Gosched()
		}
		if l.owner.Load() == 0 && l.owner.CompareAndSwap(0, me) {
			return nil
		}
	}
	// Park. The waiter count goes up before the first read of seq, so an
	// Unlock that frees the lock after our failed attempt below sees the
	// count and bumps seq after we read it: our futex wait then returns
	// at once instead of sleeping through the unlock.
	atomic.AddUint32(&l.waiters, 1)
	var seen uint64
	var seenAt time.Time
	for {
		s := atomic.LoadUint32(&l.seq)
		o := l.owner.Load()
		if o == 0 {
			if l.owner.CompareAndSwap(0, me) {
				atomic.AddUint32(&l.waiters, ^uint32(0))
				return nil
			}
			continue
		}
		if err := ctx.Err(); err != nil {
			atomic.AddUint32(&l.waiters, ^uint32(0))
			l.passWake()
			return err
		}
		now := time.Now()
		if o != seen {
			seen, seenAt = o, now
		} else if now.Sub(seenAt) >= checkAfter {
			if !ProcessID(o).Alive() {
				if l.owner.CompareAndSwap(o, me) {
					atomic.AddUint32(&l.waiters, ^uint32(0))
					return fmt.Errorf("%w (owner %v)", ErrOwnerDied, ProcessID(o))
				}
				continue
			}
			seenAt = now
		}
		if err := Wait(&l.seq, s, parkSlice); err != nil && err != ErrTimeout {
			// Cannot happen for a valid Lock; do not spin on it.
			time.Sleep(parkSlice)
		}
	}
}

// passWake hands on a wake-up that a waiter leaving without the lock may
// have consumed, so that the remaining waiters do not wait a full slice.
func (l *Lock) passWake() {
	if l.owner.Load() == 0 && atomic.LoadUint32(&l.waiters) != 0 {
		atomic.AddUint32(&l.seq, 1)
		_, _ = Wake(&l.seq, 1)
	}
}

// Unlock releases the lock held by the calling process and wakes one
// parked waiter, if any. If the calling process does not hold the lock
// (it is free, or held by another process) Unlock changes nothing and
// returns an error wrapping ErrNotOwner.
func (l *Lock) Unlock() error { return l.UnlockAs(uint64(Self())) }

// UnlockAs is Unlock for a caller that knows its ProcessID (Self()).
func (l *Lock) UnlockAs(me uint64) error {
	if !l.owner.CompareAndSwap(me, 0) {
		if o := l.owner.Load(); o != 0 {
			return fmt.Errorf("%w (held by %v)", ErrNotOwner, ProcessID(o))
		}
		return fmt.Errorf("%w (not locked)", ErrNotOwner)
	}
	if atomic.LoadUint32(&l.waiters) != 0 {
		atomic.AddUint32(&l.seq, 1)
		_, _ = Wake(&l.seq, 1)
	}
	return nil
}

// Owner returns the ProcessID of the process holding the lock, or 0 when
// it is free. The answer may be stale by the time it is used.
func (l *Lock) Owner() ProcessID {
	return ProcessID(l.owner.Load())
}

// The overlay must be exactly LockSize bytes.
var _ = [1]struct{}{}[unsafe.Sizeof(Lock{})-LockSize]
