package nic

import (
	"context"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/rdmakit/rdmakit/verbs"
)

// cqe is a completion in the ring plus what Poll needs to free send-queue
// slots: the QP and the send sequence number of the completed request.
// It fills a cache line, so that writing one touches one line.
type cqe struct {
	wc  verbs.WC
	qp  *QP
	seq uint64
	_   [64 - unsafe.Sizeof(verbs.WC{}) - 16]byte
}

// Arm states of a CQ.
const (
	armNone = iota
	armAny
	armSolicited
)

// CQ is a completion queue; it implements verbs.CQ.
//
// Its fields sit in three cache lines by who writes them: what is set up
// once or rarely changes (read by producer and poller alike), the
// poller's (its lock and the head, written on every Poll), and the solo
// producer's tail. In one line, a poller spinning on an empty CQ takes
// that line from the producer on every Poll, and every completion pays
// a miss for the armed and overrun flags it reads.
type CQ struct {
	node  *Node
	ring  []cqe // a power of two entries, at least depth
	mask  uint64
	depth uint64
	ev    chan struct{}
	done  chan struct{}
	// The producer side without mu, for a CQ that one QP has alone
	// (solo.go): its send completions are written under its own lock.
	solo    atomic.Pointer[QP]
	overrun atomic.Bool
	armed   atomic.Uint32
	closed  atomic.Bool
	users   atomic.Int32
	// single: the CQ was created SingleThreaded (one poller at a time),
	// so while a QP has it alone Poll takes no lock (solo.go); polling
	// marks the poller inside, to catch a second one.
	single bool
	// fenceless: single, and ReqNotify runs a membarrier after arming,
	// so the solo QP publishes its tail with a plain store.
	fenceless bool

	_       [64]byte
	mu      sync.Mutex
	head    uint64 // written by the poller (with mu unless single), published with storeRel; read atomically
	tail    uint64 // guarded by mu; behind stail while a QP has the CQ alone (solo.go)
	polling bool

	_     [64]byte
	stail uint64 // the tail as the solo QP publishes it; accessed atomically
	_     [56]byte
}

var _ verbs.CQ = (*CQ)(nil)

func newCQ(n *Node, depth int) *CQ {
	size := 1
	for size < depth {
		size <<= 1
	}
	return &CQ{node: n, ring: make([]cqe, size), mask: uint64(size - 1), depth: uint64(depth),
		ev: make(chan struct{}, 1), done: make(chan struct{})}
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
	if c.overrun.Load() || c.tail-atomic.LoadUint64(&c.head) >= c.depth {
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
	if c.single && c.solo.Load() != nil {
		return c.pollSingle(wc)
	}
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
	n := c.take(wc, c.head, c.tail)
	over := c.overrun.Load()
	c.mu.Unlock()
	if over {
		return n, verbs.ErrCQOverrun
	}
	return n, nil
}

// take moves the completions from head up to tail, at most len(wc), into
// wc, frees their send-queue slots and publishes the new head. The
// caller is the CQ's one poller: it holds c.mu, or the CQ is single.
func (c *CQ) take(wc []verbs.WC, head, tail uint64) int {
	n := int(tail - head)
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
				cs.outstanding.Add(-int64(e.seq - atomic.LoadUint64(&q.send.polled)))
			}
			storeRel(&q.send.polled, e.seq)
			if e.seq-q.send.reaped.Load() >= q.send.reapEvery {
				q.reap(e.seq)
			}
			e.qp = nil
		}
		head++
	}
	if n > 0 {
		// A plain store on amd64: producers read head to see room, and
		// one that sees an older head only finds the CQ fuller (as a
		// NIC that has not yet read the consumer index).
		storeRel(&c.head, head)
	}
	return n
}

// Len returns the number of completions waiting to be polled.
func (c *CQ) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.syncLocked()
	return int(c.tail - atomic.LoadUint64(&c.head))
}

// ReqNotify implements verbs.CQ.
func (c *CQ) ReqNotify(solicitedOnly bool) error {
	c.mu.Lock()
	if c.closed.Load() {
		c.mu.Unlock()
		return verbs.ErrClosed
	}
	if solicitedOnly {
		if c.armed.Load() != armAny {
			c.armed.Store(armSolicited)
		}
	} else {
		c.armed.Store(armAny)
	}
	c.mu.Unlock()
	if c.fenceless {
		// Before the caller polls: a completion whose tail store the
		// solo QP had not yet made visible when it found the CQ unarmed
		// is visible after this (membarrier_linux.go).
		membarrier()
	}
	return nil
}

// Wait implements verbs.CQ.
func (c *CQ) Wait(ctx context.Context) error {
	if f := c.node.idle; f != nil {
		f()
	}
	if f := c.node.awake; f != nil {
		defer f()
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
