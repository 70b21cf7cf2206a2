package nic

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/rdmakit/rdmakit/verbs"
)

// cqe is a completion in the ring plus what Poll needs to free send-queue
// slots: the QP and the send sequence number of the completed request.
type cqe struct {
	wc  verbs.WC
	qp  *QP
	seq uint64
}

// Arm states of a CQ.
const (
	armNone = iota
	armAny
	armSolicited
)

// CQ is a completion queue; it implements verbs.CQ.
type CQ struct {
	node    *Node
	mu      sync.Mutex
	ring    []cqe // a power of two entries, at least depth
	mask    uint64
	depth   uint64
	head    uint64 // guarded by mu
	tail    uint64 // guarded by mu; behind stail while a QP has the CQ alone (solo.go)
	overrun atomic.Bool
	armed   atomic.Uint32
	ev      chan struct{}
	done    chan struct{}
	closed  atomic.Bool
	users   atomic.Int32

	// The producer side without mu, for a CQ that one QP has alone
	// (solo.go): its send completions are written under its own lock.
	solo  atomic.Pointer[QP]
	stail atomic.Uint64 // the tail as that QP publishes it
	shead atomic.Uint64 // head as last published to it, at most head
	lazy  uint64        // how far head may run ahead of shead
}

var _ verbs.CQ = (*CQ)(nil)

func newCQ(n *Node, depth int) *CQ {
	size := 1
	for size < depth {
		size <<= 1
	}
	return &CQ{node: n, ring: make([]cqe, size), mask: uint64(size - 1), depth: uint64(depth),
		lazy: uint64(max(depth/4, 1)), ev: make(chan struct{}, 1), done: make(chan struct{})}
}

// push appends a completion. It returns false when the CQ is full: the
// completion is lost, the CQ enters overrun and the caller must move its
// QP to ERROR.
func (c *CQ) push(wc *verbs.WC, qp *QP, seq uint64, solicited bool) bool {
	c.mu.Lock()
	e, ok := c.reserveLocked()
	if e != nil {
		e.wc = *wc
		c.commitLocked(e, qp, seq, solicited || wc.Status != verbs.StatusSuccess)
	}
	c.mu.Unlock()
	return ok
}

// pushSend is push for a send completion, written in place (no WC built
// and copied on the way: the READ path is this short).
func (c *CQ) pushSend(id uint64, st verbs.Status, op verbs.WCOpcode, n uint32, result uint64, qp *QP, seq uint64) bool {
	if c.solo.Load() == qp {
		return c.pushSolo(id, st, op, n, result, qp, seq)
	}
	c.mu.Lock()
	e, ok := c.reserveLocked()
	if e != nil {
		e.wc = verbs.WC{ID: id, Status: st, Opcode: op, ByteLen: n, QPN: qp.qpn, Result: result}
		c.commitLocked(e, qp, seq, st != verbs.StatusSuccess)
	}
	c.mu.Unlock()
	return ok
}

// reserveLocked returns the entry the next completion goes to, or nil:
// with ok for a closed CQ (the completion is dropped), without ok when the
// CQ is full (it enters overrun). c.mu is held.
func (c *CQ) reserveLocked() (e *cqe, ok bool) {
	if c.closed.Load() {
		return nil, true
	}
	c.syncLocked()
	if c.overrun.Load() || c.tail-c.head >= c.depth {
		c.overrun.Store(true)
		c.signal()
		return nil, false
	}
	return &c.ring[c.tail&c.mask], true
}

// commitLocked publishes the reserved entry e and wakes an armed waiter
// (one armed for solicited events only when solicited is set). c.mu is
// held.
func (c *CQ) commitLocked(e *cqe, qp *QP, seq uint64, solicited bool) {
	e.qp = qp
	e.seq = seq
	c.tail++
	if a := c.armed.Load(); a == armAny || (a == armSolicited && solicited) {
		c.signal()
	}
}

// signal delivers a completion event; the caller holds c.mu.
func (c *CQ) signal() {
	c.armed.Store(armNone)
	select {
	case c.ev <- struct{}{}:
	default:
	}
}

// Poll implements verbs.CQ.
func (c *CQ) Poll(wc []verbs.WC) (int, error) {
	c.mu.Lock()
	c.syncLocked()
	if c.tail == c.head && len(wc) > 0 {
		if p := c.node.progress; p != nil {
			// Nothing queued: drive the transport once (read what the
			// network has, on this goroutine), as a NIC driver's poll does.
			c.mu.Unlock()
			p()
			c.mu.Lock()
			c.syncLocked()
		}
	}
	head := c.head
	n := int(c.tail - head)
	if n > len(wc) {
		n = len(wc)
	}
	for i := 0; i < n; i++ {
		e := &c.ring[head&c.mask]
		wc[i] = e.wc
		if q := e.qp; q != nil {
			// Publish the freed send-queue slots only now and then (an
			// atomic per completion is a fifth of a READ's cost);
			// PostSend asks for the exact figure when it looks full.
			if cs := q.conn.cost.Load(); cs != nil {
				cs.outstanding.Add(-int64(e.seq - q.send.polled))
			}
			q.send.polled = e.seq
			if e.seq-q.send.reaped.Load() >= q.send.reapEvery {
				q.reap(e.seq)
			}
			e.qp = nil
		}
		head++
	}
	c.head = head
	if head-c.shead.Load() >= c.lazy && c.solo.Load() != nil {
		c.shead.Store(head)
	}
	over := c.overrun.Load()
	c.mu.Unlock()
	if over {
		return n, verbs.ErrCQOverrun
	}
	return n, nil
}

// Len returns the number of completions waiting to be polled.
func (c *CQ) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.syncLocked()
	return int(c.tail - c.head)
}

// ReqNotify implements verbs.CQ.
func (c *CQ) ReqNotify(solicitedOnly bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return verbs.ErrClosed
	}
	if solicitedOnly {
		if c.armed.Load() != armAny {
			c.armed.Store(armSolicited)
		}
	} else {
		c.armed.Store(armAny)
	}
	return nil
}

// Wait implements verbs.CQ.
func (c *CQ) Wait(ctx context.Context) error {
	if f := c.node.idle; f != nil {
		f()
	}
	select {
	case <-c.ev:
		return nil
	case <-c.done:
		return verbs.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Depth implements verbs.CQ.
func (c *CQ) Depth() int { return int(c.depth) }

// Destroy implements verbs.CQ.
func (c *CQ) Destroy() error {
	if c.users.Load() > 0 {
		return verbs.ErrBusy
	}
	c.node.mu.Lock()
	delete(c.node.cqs, c)
	c.node.mu.Unlock()
	c.close()
	return nil
}

func (c *CQ) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed.Load() {
		c.closed.Store(true)
		close(c.done)
	}
}
