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
	ring    []cqe
	head    uint64
	tail    uint64
	overrun bool
	armed   uint8
	ev      chan struct{}
	done    chan struct{}
	closed  bool
	users   atomic.Int32
}

var _ verbs.CQ = (*CQ)(nil)

func newCQ(n *Node, depth int) *CQ {
	return &CQ{node: n, ring: make([]cqe, depth), ev: make(chan struct{}, 1), done: make(chan struct{})}
}

// push appends a completion. It returns false when the CQ is full: the
// completion is lost, the CQ enters overrun and the caller must move its
// QP to ERROR.
func (c *CQ) push(wc *verbs.WC, qp *QP, seq uint64, solicited bool) bool {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return true
	}
	if c.overrun || c.tail-c.head >= uint64(len(c.ring)) {
		c.overrun = true
		c.signal()
		c.mu.Unlock()
		return false
	}
	e := &c.ring[c.tail%uint64(len(c.ring))]
	e.wc = *wc
	e.qp = qp
	e.seq = seq
	c.tail++
	if c.armed == armAny || (c.armed == armSolicited && (solicited || wc.Status != verbs.StatusSuccess)) {
		c.signal()
	}
	c.mu.Unlock()
	return true
}

// signal delivers a completion event; the caller holds c.mu.
func (c *CQ) signal() {
	c.armed = armNone
	select {
	case c.ev <- struct{}{}:
	default:
	}
}

// Poll implements verbs.CQ.
func (c *CQ) Poll(wc []verbs.WC) (int, error) {
	if p := c.node.progress; p != nil && len(wc) > 0 && c.empty() {
		// Nothing queued: drive the transport once (read what the network
		// has, on this goroutine), as a NIC driver's poll does.
		p()
	}
	c.mu.Lock()
	n := int(c.tail - c.head)
	if n > len(wc) {
		n = len(wc)
	}
	for i := 0; i < n; i++ {
		e := &c.ring[c.head%uint64(len(c.ring))]
		wc[i] = e.wc
		if e.qp != nil {
			e.qp.reap(e.seq)
			e.qp = nil
		}
		c.head++
	}
	over := c.overrun
	c.mu.Unlock()
	if over {
		return n, verbs.ErrCQOverrun
	}
	return n, nil
}

// empty reports whether no completion is queued.
func (c *CQ) empty() bool {
	c.mu.Lock()
	e := c.tail == c.head
	c.mu.Unlock()
	return e
}

// Len returns the number of completions waiting to be polled.
func (c *CQ) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int(c.tail - c.head)
}

// ReqNotify implements verbs.CQ.
func (c *CQ) ReqNotify(solicitedOnly bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return verbs.ErrClosed
	}
	if solicitedOnly {
		if c.armed != armAny {
			c.armed = armSolicited
		}
	} else {
		c.armed = armAny
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
func (c *CQ) Depth() int { return len(c.ring) }

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
	if !c.closed {
		c.closed = true
		close(c.done)
	}
}
