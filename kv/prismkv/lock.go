package prismkv

import (
	"context"
	"time"

	"github.com/rdmakit/rdmakit/kv/internal/remote"
	"github.com/rdmakit/rdmakit/verbs"
)

// Segment locks. Inserting a key that has no slot is the one step that
// must not run twice at once for a key: two inserters that both found no
// slot would each take one, and the key would have two. So an inserter
// holds the lock of its key's home segment (segSlots slots) from the
// lookup that finds no slot to the CAS that takes one; every inserter of
// the key takes the same lock. Updates and deletes of a key that has a
// slot take no lock.
//
// A lock word is 0 or its holder's token: the client's random id in the
// high half, a sequence number in the low. A holder that dies holds it
// for good, so a waiter that sees one token for leaseTime takes the lock
// over (one CAS from that token to its own). The holder's CAS is
// conditional on its token still being there (run's lock test), so a
// holder stalled past its lease installs nothing.
const leaseTime = time.Second

func (c *Client) lockAddr(seg int) uint64 { return c.locks + uint64(8*seg) }

// segment is the lock segment of slot i.
func segment(i int) int { return i / segSlots }

// lockTry is one try to take a segment's lock: a CAS of its word from
// from (0, or the token of a holder whose lease ran out) to token, run
// first in a probe's list.
type lockTry struct {
	seg         int
	from, token uint64
	got         bool
	cur         uint64 // the word the CAS found
}

// newLockTry is a first try at seg's lock, with a new token.
func (c *Client) newLockTry(seg int) *lockTry {
	return &lockTry{seg: seg, token: c.id | uint64(c.seq.Add(1)|1)}
}

// wr is the try's CAS, its result into sgl.
func (lt *lockTry) wr(c *Client, sgl []verbs.SGE) verbs.SendWR {
	return verbs.SendWR{Opcode: verbs.OpAtomicCmpAndSwp, SGL: sgl, RemoteAddr: c.lockAddr(lt.seg), RKey: c.rkey,
		Atomic: verbs.AtomicArgs{Compare: [4]uint64{lt.from}, Swap: [4]uint64{lt.token}}}
}

// result takes the word the CAS found.
func (lt *lockTry) result(cur uint64) { lt.cur, lt.got = cur, cur == lt.from }

// findLocked looks key up holding its home segment's lock (lt), waiting
// for the lock with a backoff of 20 µs doubling to 1 ms, and taking over
// a lock whose holder kept it for leaseTime. An error leaves s no longer
// the caller's.
func (c *Client) findLocked(ctx context.Context, s remote.Slot, key []byte, lt *lockTry) (found, error) {
	var holder uint64
	var since time.Time
	backoff := 20 * time.Microsecond
	for {
		f, err := c.find(ctx, s, key, true, lt, true)
		if err != nil || lt.got {
			return f, err
		}
		lt.from = 0
		now := time.Now()
		switch {
		case lt.cur != holder:
			holder, since = lt.cur, now
		case now.Sub(since) >= leaseTime:
			lt.from = holder // its holder is gone: take it over
			c.takeovers.Add(1)
			continue
		}
		if err := ctx.Err(); err != nil {
			c.ops.Release(s)
			return found{}, err
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, time.Millisecond)
	}
}

// unlock releases a lock the caller holds, on a slot of its own, in the
// background: the caller's operation ended (its context) while holding
// it, and its slot is no longer its own. Releasing it early is safe: the
// CAS of a list still on its way tests the lock first.
func (c *Client) unlock(seg int, token uint64) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		c.life.RLock()
		defer c.life.RUnlock()
		if c.closed.Load() {
			return
		}
		s, err := c.ops.Acquire(ctx)
		if err != nil {
			return
		}
		var wr [1]verbs.SendWR
		sge := [1]verbs.SGE{s.SGE(offLock+8, 8)}
		wr[0] = verbs.SendWR{Opcode: verbs.OpAtomicCmpAndSwp, Flags: verbs.FlagSignaled, SGL: sge[:], RemoteAddr: c.lockAddr(seg),
			RKey: c.rkey, Atomic: verbs.AtomicArgs{Compare: [4]uint64{token}}}
		if _, err := c.ops.Do(ctx, s, wr[:]); err == nil {
			c.ops.Release(s)
		}
	}()
}
