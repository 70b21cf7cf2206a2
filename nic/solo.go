package nic

import "github.com/rdmakit/rdmakit/verbs"

// A CQ that one QP has alone — its send and receive CQ, no SRQ, no other
// QP — and on which that QP has not posted a receive has a single
// producer: the QP's send side, which completes requests holding q.mu.
// Its completions then go into the ring without c.mu: the QP writes the
// entry and publishes the tail (stail) with one atomic store; Poll, still
// under c.mu for its own callers, takes that tail up. The QP sees the
// polled head only lazily (shead, published every c.lazy entries) and
// takes c.mu for the exact figure when the CQ looks full, so the depth
// and the overrun are exactly those of the locked path.
//
// The mode ends for good when another QP attaches to the CQ, when the QP
// posts a receive (a responder could then complete it on another
// goroutine) or when it is destroyed: endSolo then waits for q.mu, after
// which no completion is being written without c.mu.

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
		c.stail.Store(c.tail)
		c.shead.Store(c.head)
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
	if t := c.stail.Load(); t > c.tail {
		c.tail = t
	}
}

// pushSolo is pushSend for c's solo QP qp, whose lock the caller holds.
func (c *CQ) pushSolo(id uint64, st verbs.Status, op verbs.WCOpcode, n uint32, result uint64, qp *QP, seq uint64) bool {
	if c.closed.Load() {
		return true // dropped, as reserveLocked does
	}
	t := c.stail.Load() // only qp writes it
	if c.overrun.Load() || t-c.shead.Load() >= c.depth {
		// Full, or only looks so: ask for the polled head.
		c.mu.Lock()
		c.shead.Store(c.head)
		if c.overrun.Load() || t-c.head >= c.depth {
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
	c.stail.Store(t + 1)
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
