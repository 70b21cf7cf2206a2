package nic

import (
	"sync"

	"github.com/rdmakit/rdmakit/verbs"
)

// Direct deposit (the shm transport): a receive queue can be published in
// memory that the peers map — a RecvArea the transport supplies — so that
// a peer's SEND consumes the oldest posted receive itself, writes the
// payload into the receive's buffers and leaves the receive's completion
// in the area, where this node's polling picks it up. The responder's CPU
// does none of the work, as with an RDMA NIC.
//
// One order of consumption: every consumer of a published queue takes the
// area's lock (a lock shared across processes) — a peer's deposit, and
// this node delivering a SEND or WRITE_WITH_IMM that came the ordinary
// way (recvQueue.lock). The position the queue is consumed to lives in the
// area; the node reads it back under the lock. Before it completes a
// receive itself, the node takes the completions peers left in the area
// (under the same lock), so a queue's receives complete in order.
//
// The queue keeps its own copy of every receive (ids and scatter lists, as
// posted): the area's descriptors are what peers may act on, never what
// this node trusts. A receive the peers cannot deposit into (a buffer in
// a region they cannot map, too many segments) is published as such, and
// the peer then sends its SEND the ordinary way.

// RecvArea is a receive queue's face in memory that other processes map.
// Its methods that read shared memory validate what they read: a peer can
// scribble the area, and must not make the node fault, hang or complete a
// receive of a queue that is not the area's.
type RecvArea interface {
	// Lock takes the area's lock, shared with every depositor; it first
	// repairs the area if a depositor died holding it (its journal).
	Lock()
	// Unlock releases it.
	Unlock()
	// Consumed returns the position the queue's receives are consumed up
	// to, by this node or by deposits: at least head and at most tail
	// (the queue's own positions), else head (and the area is broken:
	// peers deposit no more).
	Consumed(head, tail uint64) uint64
	// SetConsumed records the position after this node consumed
	// receives itself; the caller holds the lock.
	SetConsumed(pos uint64)
	// Post publishes the receive at position pos, before SetPosted moves
	// the tail past it. segs are its buffers, or nil when peers must not
	// deposit into it.
	Post(pos uint64, id uint64, segs []RecvSeg)
	// SetPosted publishes the tail: receives up to it are posted.
	SetPosted(tail uint64)
	// Take returns the next completion a deposit left, validated, or
	// false when there is none. One goroutine at a time calls it.
	Take(d *Deposited) bool
	// Close withdraws the area: no deposit starts after it returns (one
	// in progress finished), and its memory may be reused.
	Close()
}

// RecvSeg is one buffer of a published receive: length bytes at offset
// of the region.
type RecvSeg struct {
	MR     *MR
	Offset uint64
	Length uint32
}

// Deposited is a receive completion a peer left in a RecvArea.
type Deposited struct {
	ID      uint64
	QPN     uint32 // the QP whose receive CQ gets the completion
	SrcQPN  uint32
	SrcID   uint32
	ByteLen uint32
	Imm     uint32
	Flags   verbs.WCFlags // WCWithImm, WCSolicited
}

// maxDepositSegs bounds the buffers of a receive peers may deposit into.
const maxDepositSegs = 4

// depositState is the part of a recvQueue that a published queue adds.
type depositState struct {
	area RecvArea
	node *Node
	pd   *PD
	cmu  sync.Mutex // the consumer of the area's completions (Take)
	segs [maxDepositSegs]RecvSeg
	dp   Deposited // take's, under cmu (a local would escape to the heap)
}

// RecvAreaOf returns the area a QP's incoming SENDs are deposited into
// (its own receive queue's or its SRQ's), or nil.
func (q *QP) RecvAreaOf() RecvArea {
	if d := q.recvQueue().dep; d != nil {
		return d.area
	}
	return nil
}

// publishRecv gives r a RecvArea when the node's transport makes them.
func (n *Node) publishRecv(r *recvQueue, pd *PD) {
	if n.recvAreas == nil {
		return
	}
	a := n.recvAreas(len(r.ids), r.maxSGE)
	if a == nil {
		return
	}
	r.dep = &depositState{area: a, node: n, pd: pd}
	n.mu.Lock()
	old := *n.areas.Load()
	na := make([]*recvQueue, len(old), len(old)+1)
	copy(na, old)
	na = append(na, r)
	n.areas.Store(&na)
	n.mu.Unlock()
}

// unpublishRecv withdraws r's area.
func (n *Node) unpublishRecv(r *recvQueue) {
	d := r.dep
	if d == nil {
		return
	}
	n.mu.Lock()
	old := *n.areas.Load()
	na := make([]*recvQueue, 0, len(old))
	for _, x := range old {
		if x != r {
			na = append(na, x)
		}
	}
	n.areas.Store(&na)
	n.mu.Unlock()
	r.mu.Lock()
	d.area.Close()
	r.mu.Unlock()
}

// lock takes the queue: its mutex and, when it is published, the area's
// lock; it then takes up what deposits consumed and completed.
func (r *recvQueue) lock() {
	r.mu.Lock()
	if d := r.dep; d != nil {
		d.area.Lock()
		r.head = d.area.Consumed(r.head, r.tail)
		d.cmu.Lock()
		d.take(r)
		d.cmu.Unlock()
	}
}

// unlock releases what lock took.
func (r *recvQueue) unlock() {
	if d := r.dep; d != nil {
		d.area.Unlock()
	}
	r.mu.Unlock()
}

// publish publishes the receives posted from position from on; the
// caller holds r.mu.
func (r *recvQueue) publish(from uint64) {
	d := r.dep
	if d == nil || from == r.tail {
		return
	}
	for pos := from; pos < r.tail; pos++ {
		slot := int(pos % uint64(len(r.ids)))
		sgl := r.sges[slot*r.maxSGE : slot*r.maxSGE+int(r.nsge[slot])]
		d.area.Post(pos, r.ids[slot], d.segments(sgl))
	}
	d.area.SetPosted(r.tail)
}

// segments resolves a receive's scatter list for peers, or returns nil
// when they must not deposit into it: any entry this node's own delivery
// would refuse (LOC_PROT_ERR) is left to that delivery.
func (d *depositState) segments(sgl []verbs.SGE) []RecvSeg {
	n := 0
	for i := range sgl {
		s := &sgl[i]
		if s.Length == 0 {
			continue
		}
		if n == len(d.segs) {
			return nil
		}
		m := d.node.keys.local(s.LKey)
		if m == nil || m.pd != d.pd || m.reg.Access&verbs.AccessLocalWrite == 0 || m.shared.Load() == 0 {
			return nil
		}
		if _, ok := m.slice(s.Addr, uint64(s.Length)); !ok {
			return nil
		}
		d.segs[n] = RecvSeg{MR: m, Offset: s.Addr - m.reg.Base, Length: s.Length}
		n++
	}
	return d.segs[:n]
}

// take moves the completions deposits left into the receive CQs of their
// QPs; the caller holds d.cmu. It reports whether it moved any.
func (d *depositState) take(r *recvQueue) bool {
	dp := &d.dp
	did := false
	for d.area.Take(dp) {
		did = true
		q := d.node.qp(dp.QPN)
		if q == nil || q.typ != verbs.RC || q.recvQueue() != r {
			continue // not a QP of this queue: a peer's garbage
		}
		sol := dp.Flags&verbs.WCSolicited != 0
		wc := verbs.WC{ID: dp.ID, Opcode: verbs.WCRecv, Flags: dp.Flags & (verbs.WCWithImm | verbs.WCSolicited),
			ByteLen: dp.ByteLen, QPN: q.qpn, SrcQPN: dp.SrcQPN, SrcID: dp.SrcID}
		if wc.Flags&verbs.WCWithImm != 0 {
			wc.Imm = dp.Imm
		}
		if !q.recv.cq.push(&wc, nil, 0, sol) {
			q.toError()
		}
	}
	return did
}

// TakeDeposits moves the receive completions that peers deposited into
// the node's published receive queues to their CQs (the transport calls
// it when a depositor signalled). It reports whether it moved any.
func (n *Node) TakeDeposits() bool {
	did := false
	for _, r := range *n.areas.Load() {
		d := r.dep
		// Wait for another taker rather than skip: the caller has cleared
		// the transport's pending flag, and a completion deposited after
		// the other taker's last look would otherwise wait, unseen, for
		// the next deposit (an echo ping-pong under event polling stopped
		// for good).
		d.cmu.Lock()
		if d.take(r) {
			did = true
		}
		d.cmu.Unlock()
	}
	return did
}

// SetShared records the transport's name for a region that peers map
// (0: not mapped by peers); receives into it may be published for
// deposit.
func (m *MR) SetShared(v uint64) { m.shared.Store(v) }

// Shared returns what SetShared recorded.
func (m *MR) Shared() uint64 { return m.shared.Load() }

// Depositor is a DirectLink whose responder publishes its receive queues:
// a SEND can be deposited into the responder QP's oldest receive on the
// posting goroutine (requester_deposit.go).
type Depositor interface {
	// Deposit delivers the message payload (length bytes) of a SEND or
	// SEND_WITH_IMM from this node's QP src into the oldest receive of
	// the responder's QP qpn, and completes that receive there. It
	// returns ok=false, having changed nothing, when it cannot decide
	// here — no area, no receive posted (RNR), a receive too small or not
	// depositable, the responder QP not receiving or not connected to
	// src: the request then goes over the link, where the responder
	// decides. st is the requester's status otherwise.
	Deposit(src, qpn uint32, op verbs.Opcode, flags verbs.SendFlags, imm uint32, payload [][]byte, length uint64) (st verbs.Status, ok bool)
}

// CopyLists copies the bytes of the src list into the dst list, as a
// delivery does.
func CopyLists(dst, src [][]byte) { copyLists(dst, src) }

// areasInit is the empty list of published queues.
func areasInit(n *Node) {
	var none []*recvQueue
	n.areas.Store(&none)
}
