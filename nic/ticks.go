package nic

import (
	"sync"
	"sync/atomic"
	"time"
)

// ticks is the coarse clock of requests on the wire. A clock read costs
// more than a small shared-memory message on some machines, so a request
// is stamped with the number of Expire calls so far (one atomic load), and
// Expire, which reads the clock anyway, keeps the times of the recent
// ticks. A request stamped k went out after tick k and before tick k+1, so
// its age is at least now - time(k+1): expiry is never early, and late by
// at most an expiry period.
type ticks struct {
	n     atomic.Uint64
	mu    sync.Mutex
	times [64]time.Duration // times[k%64] is the clock at tick k
	last  time.Duration     // the clock at the latest tick
}

// now is the current tick.
func (t *ticks) now() uint64 { return t.n.Load() }

// tick advances the clock; Expire calls it.
func (t *ticks) tick() {
	c := now()
	t.mu.Lock()
	k := t.n.Load() + 1
	t.times[k%uint64(len(t.times))] = c
	t.last = c
	t.n.Store(k)
	t.mu.Unlock()
}

// age is a lower bound of the time since a request stamped k went out,
// as of the latest tick.
func (t *ticks) age(k uint64) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	cur := t.n.Load()
	next := k + 1
	if next > cur {
		return 0
	}
	if cur-next >= uint64(len(t.times)) {
		next = cur - uint64(len(t.times)) + 1 // the oldest tick kept: an older one is earlier still
	}
	return t.last - t.times[next%uint64(len(t.times))]
}
