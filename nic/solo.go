package nic

import (
	"fmt"
	"sync/atomic"

	"github.com/rdmakit/rdmakit/verbs"
)

// A CQ that one QP has alone — its send CQ, no other QP's, and either not
// its receive CQ too or, if it is, without an SRQ and before the QP posts
// a receive — has a single producer: the QP's send side, which completes
// requests holding q.mu. Its completions then go into the ring without
// c.mu: the QP writes the entry and publishes the tail (stail) with one
// atomic store; Poll takes that tail up, under c.mu for its own callers,
// or without any lock when the CQ is single (verbs.CQInitAttr
// SingleThreaded: one poller at a time). The QP reads the polled head,
// which Poll publishes with a release store, and takes c.mu to look
// again when the CQ seems full, so the depth and the overrun are exactly
// those of the locked path.
//
// The mode ends for good when another QP attaches to the CQ, when the QP
// posts a receive completed on it (a responder could then complete it on
// another goroutine) or when it is destroyed: endSolo then waits for
// q.mu, after which no completion is being written without c.mu.

// attach counts q as a user of c. With alone set (c is both of q's CQs
// and q has no SRQ) and no other user, c becomes q's alone; another
// user ends that.
func (c *CQ) attach(q *QP, alone bool) {
	c.mu.Lock()
	other := c.solo.Load()
	if other == q {
		other = nil
	}
	if alone && other == nil && c.users.Load() == 0 && !c.closed.Load() {
		c.syncLocked()
		atomic.StoreUint64(&c.stail, c.tail)
		c.solo.Store(q)
	}
	c.users.Add(1)
	c.mu.Unlock()
	if other != nil {
		c.endSolo(other) // after c.mu: q.mu comes before it
	}
}

// endSolo ends q's single-producer mode on c, if it has it; the caller
// holds neither q.mu nor c.mu.
func (c *CQ) endSolo(q *QP) {
	if c.solo.Load() != q || !c.solo.CompareAndSwap(q, nil) {
		return
	}
	// A completion q started writing without c.mu is finished once q.mu
	// can be had; every later one takes c.mu (and syncLocked picks up
	// the tail it left).
	q.mu.Lock()
	busy := q.send.cq == c // the wait is the point; the test keeps the section non-empty
	q.mu.Unlock()
	_ = busy
}

// syncLocked takes up the tail the solo QP published. c.mu is held.
func (c *CQ) syncLocked() {
	if t := atomic.LoadUint64(&c.stail); t > c.tail {
		c.tail = t
	}
}

// pushSolo is pushSend for c's solo QP qp, whose lock the caller holds.
func (c *CQ) pushSolo(id uint64, st verbs.Status, op verbs.WCOpcode, n uint32, result uint64, qp *QP, seq uint64) bool {
	if c.closed.Load() {
		return true // dropped, as reserveLocked does
	}
	t := atomic.LoadUint64(&c.stail) // only qp writes it
	if c.overrun.Load() || t-atomic.LoadUint64(&c.head) >= c.depth {
		// Full, or only looks so: a locked poll publishes its head
		// before it releases c.mu.
		c.mu.Lock()
		if c.overrun.Load() || t-atomic.LoadUint64(&c.head) >= c.depth {
			c.overrun.Store(true)
			c.signal()
			c.mu.Unlock()
			return false
		}
		c.mu.Unlock()
	}
	e := &c.ring[t&c.mask]
	e.wc = verbs.WC{ID: id, Status: st, Opcode: op, ByteLen: n, QPN: qp.qpn, Result: result}
	e.qp = qp
	e.seq = seq
	if c.fenceless {
		// A plain store: ReqNotify's membarrier orders it for the load
		// of armed below (see membarrier_linux.go).
		storeRel(&c.stail, t+1)
	} else {
		atomic.StoreUint64(&c.stail, t+1)
	}
	// Arming stores armed and then polls; this loads it after the store
	// of the tail: one of the two sees the other.
	if a := c.armed.Load(); a == armAny || (a == armSolicited && st != verbs.StatusSuccess) {
		c.mu.Lock()
		if a := c.armed.Load(); a == armAny || (a == armSolicited && st != verbs.StatusSuccess) {
			c.signal()
		}
		c.mu.Unlock()
	}
	return true
}

// errConcurrentPoll is what Poll of a single CQ returns when it finds
// another Poll inside (the caller broke the promise; not every case is
// caught — the race detector catches the rest).
var errConcurrentPoll = fmt.Errorf("%w: concurrent Poll of a single-threaded CQ", verbs.ErrInvalidState)

// pollSingle is Poll of a single CQ that a QP has alone: the one poller
// takes the entries up to the published tail without c.mu.
func (c *CQ) pollSingle(wc []verbs.WC) (int, error) {
	if c.polling {
		return 0, errConcurrentPoll
	}
	c.polling = true
	head := atomic.LoadUint64(&c.head)
	t := atomic.LoadUint64(&c.stail)
	if t == head && len(wc) > 0 {
		if p := c.node.progress; p != nil {
			p() // as Poll: drive the transport once
			t = atomic.LoadUint64(&c.stail)
		}
	}
	n := c.take(wc, head, t)
	c.polling = false
	if c.overrun.Load() {
		return n, verbs.ErrCQOverrun
	}
	return n, nil
}
