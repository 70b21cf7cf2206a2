// Package shmem provides the shared memory primitives of the shm transport:
// memfd-backed segments mapped by several processes, file descriptor passing
// over Unix sockets, futex wait and wake on words inside a segment, and a
// robust mutex that lives in shared memory and survives a crashed holder.
//
// # Memory model
//
// A [Segment] is a MAP_SHARED mapping of a memfd. Every process that maps
// the same memfd sees the same bytes; Go's race detector does not see those
// bytes at all, so code that shares them must follow these rules by
// construction rather than rely on the detector:
//
//   - A word that two processes (or two goroutines) may touch concurrently,
//     with at least one of them writing, is accessed only with sync/atomic
//     (or through [Uint32At] / [Uint64At] pointers passed to sync/atomic).
//     Go's atomics are sequentially consistent, also across processes,
//     because they compile to locked x86 instructions (or the equivalent
//     barriers elsewhere) on the shared physical page.
//   - 4-byte words must be 4-byte aligned and 8-byte words 8-byte aligned.
//     mmap returns page-aligned memory, so alignment is a matter of
//     choosing offsets; [Uint32At], [Uint64At] and [LockAt] check it.
//   - Plain (non-atomic) bytes — payloads, counters protected by a [Lock] —
//     may be accessed only by the process that currently owns them by
//     protocol: the holder of the Lock that guards them, or the producer
//     of a ring slot before it publishes the slot with an atomic store.
//     Acquiring a Lock (an atomic compare-and-swap) and releasing it (an
//     atomic compare-and-swap) order these plain accesses.
//   - A futex word ([Wait], [Wake]) is a 4-byte aligned uint32 in a
//     MAP_SHARED mapping (or ordinary Go memory for in-process use). The
//     futex calls are not private: the kernel matches waiters by the
//     backing page, so waiters and wakers in different processes meet.
//   - Fresh memfd memory is zero, and zero bytes are a valid unlocked
//     [Lock]. The creator of a segment lays it out; other processes only
//     map it.
//
// # Crash model
//
// A process may die at any instruction, including while it holds a Lock or
// half way through updating plain bytes. What survives a dead peer:
//
//   - The segment itself: its memory lives as long as any process maps it
//     or holds its descriptor. A segment made by [Create] is sealed against
//     shrinking and growing, so a peer cannot truncate it and make the
//     survivors fault (SIGBUS) on access.
//   - Atomic words keep the last value the dead peer stored; there are no
//     torn 4- or 8-byte aligned words.
//   - A Lock held by the dead peer is taken over by the next process that
//     waits for it: [Lock.Lock] notices the owner's death within a few
//     milliseconds and returns an error matching [ErrOwnerDied] while
//     holding the lock, like pthread's EOWNERDEAD. The plain bytes the lock
//     guards may be half updated; the new holder must repair or reset them
//     before it unlocks.
//   - A waiter that dies while parked in [Lock.Lock] leaves the lock's
//     waiter count one too high. That costs later unlocks a futile wake
//     system call, never correctness.
//
// Ownership is per process, not per goroutine: an owner id is the pid
// together with a token derived from the process start time ([ProcessID]),
// so a pid reused by an unrelated process is not mistaken for the dead
// owner. All processes sharing a segment must share a pid namespace and
// /proc must be mounted for pid reuse to be detected; without /proc the
// liveness check falls back to kill(pid, 0).
package shmem
