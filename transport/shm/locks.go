package shm

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"

	"github.com/rdmakit/rdmakit/nic"
	"github.com/rdmakit/rdmakit/transport/shm/internal/shmem"
)

// Journal fields of a lock stripe, after its 16-byte lock.
const (
	jValid = 16
	jWords = 20
	jRKey  = 24
	jAddr  = 32
	jOld   = 40
)

// sharedLocks is a device's atomics lock table in its node segment
// (nic.AtomicLocks), as one process sees it: the device itself, or a peer
// executing atomics on the device's memory directly. Stripes are robust
// locks: a holder that dies is detected by the next locker, which restores
// a half-applied 16- or 32-byte atomic from the stripe's journal.
type sharedLocks struct {
	me    uint64 // shmem.Self()
	seg   *nodeSeg
	locks [nic.LockStripes]*shmem.Lock
	// resolve returns the n bytes at addr under rkey of the device's
	// memory as this process maps them, or nil.
	resolve   func(rkey uint32, addr, n uint64) []byte
	recovered atomic.Int64
}

func newSharedLocks(seg *nodeSeg, resolve func(rkey uint32, addr, n uint64) []byte) *sharedLocks {
	l := &sharedLocks{me: uint64(shmem.Self()), seg: seg, resolve: resolve}
	for i := range l.locks {
		lk, err := shmem.LockAt(seg.stripe(uint32(i)))
		if err != nil {
			panic("shm: lock table misaligned: " + err.Error()) // the layout is a constant
		}
		l.locks[i] = lk
	}
	return l
}

// Lock implements nic.AtomicLocks.
func (l *sharedLocks) Lock(s uint32) {
	lk := l.locks[s]
	if lk.TryLockAs(l.me) {
		return
	}
	err := lk.Lock(context.Background())
	if errors.Is(err, shmem.ErrOwnerDied) {
		l.recover(s)
	}
}

// recover restores the words a dead holder of stripe s journaled.
func (l *sharedLocks) recover(s uint32) {
	l.recovered.Add(1)
	b := l.seg.stripe(s)
	if atomic.LoadUint32(u32(b, jValid)) == 0 {
		slog.Warn("shm: atomics lock taken over from a dead process", "stripe", s)
		return
	}
	n := atomic.LoadUint32(u32(b, jWords))
	rkey := atomic.LoadUint32(u32(b, jRKey))
	addr := atomic.LoadUint64(u64(b, jAddr))
	if n >= 2 && n <= 4 {
		if mem := l.resolve(rkey, addr, uint64(n)*8); mem != nil {
			for i := 0; i < int(n); i++ {
				atomic.StoreUint64(u64(mem, 8*i), atomic.LoadUint64(u64(b, jOld+8*i)))
			}
		}
	}
	atomic.StoreUint32(u32(b, jValid), 0)
	slog.Warn("shm: atomics lock taken over from a dead process; its half-applied atomic was undone", "stripe", s, "words", n)
}

// Unlock implements nic.AtomicLocks.
func (l *sharedLocks) Unlock(s uint32) {
	b := l.seg.stripe(s)
	if atomic.LoadUint32(u32(b, jValid)) != 0 {
		atomic.StoreUint32(u32(b, jValid), 0)
	}
	_ = l.locks[s].UnlockAs(l.me)
}

// Journal implements nic.AtomicLocks.
func (l *sharedLocks) Journal(s uint32, rkey uint32, addr uint64, orig *[4]uint64, n int) {
	b := l.seg.stripe(s)
	for i := 0; i < n; i++ {
		atomic.StoreUint64(u64(b, jOld+8*i), orig[i])
	}
	atomic.StoreUint32(u32(b, jWords), uint32(n))
	atomic.StoreUint32(u32(b, jRKey), rkey)
	atomic.StoreUint64(u64(b, jAddr), addr)
	atomic.StoreUint32(u32(b, jValid), 1)
}
