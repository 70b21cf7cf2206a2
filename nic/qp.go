package nic

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// maxSGE bounds scatter/gather lists on every software node; it sizes the
// per-QP scratch arrays that keep the execution path allocation-free.
const maxSGE = 16

// QP is a queue pair; it implements verbs.QP. Its state is grouped by the
// role that uses it, as in a hardware NIC's QP context: the connection
// (conn), the send side (send) and, toward another process, the link
// requester's transmission (link, retx); the receive side (recv); what it
// offers as a responder (resp); and the scratch its requesters execute
// with (exec).
//
// Lock order: QP.mu, then a receive queue's mu (own, an SRQ's, or a
// responder QP's), then a CQ's mu. Fields read by responders (state and
// resp's access, qkey, peer) are atomics so a responder never takes a
// foreign QP's mu.
type QP struct {
	node   *Node
	pd     *PD
	typ    verbs.QPType
	qpn    uint32
	cap    verbs.QPCap
	sigAll bool
	limits verbs.Limits
	state  atomic.Uint32

	mu   qpLock // the send side, the connection and attributes (single.go)
	conn qpConn
	send qpSend
	link qpLink
	retx retx // the link requester's retransmission state (retransmit.go)
	recv qpRecv
	resp qpResp
	exec qpExec
	fast qpFast // the direct fast path's caches (requester_fast.go)
}

// qpConn is the QP's connection: where its requests go. Guarded by mu.
type qpConn struct {
	dest     Target
	destNode *Node // dest when it is in this process
	// cost is destNode's cost model when it has one: requests posted to
	// it count as waiting for it until their completions are polled.
	cost        atomic.Pointer[costState]
	destLink    Link       // dest when it is in another process
	direct      DirectLink // destLink, when its memory is mapped here
	destQPN     uint32
	destQP      *QP
	epoch       uint32 // counts connections: Modify to RTR starts a new one
	rnrRetry    int    // -1 forever
	minRNR      time.Duration
	retryBudget time.Duration
}

// qpSend is the send side: the send queue, its completions and PRISM
// chaining. Guarded by mu unless noted.
type qpSend struct {
	cq        *CQ
	sq        sendQueue
	running   bool          // a drain goroutine owns the deferred queue
	posted    uint64        // send sequence number of the last posted request
	reaped    atomic.Uint64 // a request whose completion was polled, at most polled
	polled    uint64        // the last request whose completion was polled; written by cq's poller (storeRel), read atomically
	reapEvery uint64        // how far polled may run ahead of reaped
	prevOK    bool          // the last completed request succeeded (chain.go)
	failedCmp bool          // the request being completed is a CAS whose compare failed
	result    uint64        // the WC.Result of the request being completed (ALLOCATE)
	cond      verbs.SendWR  // a CONDITIONAL request decided at post, without the flag
}

// qpLink is the link requester's transmission toward another process
// (conn.destLink != nil). Guarded by mu.
type qpLink struct {
	req      Request // the request being encoded
	flushing []Link  // links with requests appended and not yet flushed
}

// qpRecv is the receive side.
type qpRecv struct {
	cq  *CQ
	srq *SRQ
	rq  recvQueue // the QP's own receives, when it has no SRQ
}

// qpResp is what the QP offers as a responder, read by requesters'
// executions without mu.
type qpResp struct {
	access atomic.Uint32 // the remote access it grants
	qkey   atomic.Uint32 // UD: the QKey datagrams must carry
	// peer is the requester an RC QP was connected to at RTR, the only one
	// it serves as a responder (isolation.go); nil outside a connection.
	peer atomic.Pointer[connPeer]
	// scratch is the QP's scratch area as a responder (scratch.go).
	scratch [verbs.ScratchSize / 8]uint64
}

// qpExec is the scratch the QP's requesters execute with, so that the
// hot path allocates nothing. Guarded by mu.
type qpExec struct {
	lbuf [maxSGE][]byte // a resolved local scatter list
	lmr  [maxSGE]*MR    // the regions lbuf pins
	sc   scratch        // a responder's resolved receive (requester_local.go)
	rreq request        // the request being executed (requester_local.go, requester_direct.go)
	rout outcome
	lmem memory // the responder memory of requester_local.go: dq set per request
	dmem memory // the responder memory of requester_direct.go, set at RTR
}

var _ verbs.QP = (*QP)(nil)

// CreateQP implements verbs.PD.
func (pd *PD) CreateQP(a verbs.QPInitAttr) (verbs.QP, error) {
	if err := pd.usable(); err != nil {
		return nil, err
	}
	n := pd.node
	if a.Type != verbs.RC && a.Type != verbs.UD {
		return nil, fmt.Errorf("%w: QP type %v", verbs.ErrNotSupported, a.Type)
	}
	scq, ok1 := a.SendCQ.(*CQ)
	rcq, ok2 := a.RecvCQ.(*CQ)
	if !ok1 || !ok2 || scq == nil || rcq == nil || scq.node != n || rcq.node != n {
		return nil, fmt.Errorf("%w: send and receive CQs must be CQs of this device", verbs.ErrInvalidArg)
	}
	var srq *SRQ
	if a.SRQ != nil {
		s, ok := a.SRQ.(*SRQ)
		if !ok || s.pd != pd {
			return nil, fmt.Errorf("%w: SRQ of another device or PD", verbs.ErrInvalidArg)
		}
		srq = s
	}
	c := a.Cap
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.MaxSendWR, verbs.DefaultMaxWR)
	def(&c.MaxRecvWR, verbs.DefaultMaxWR)
	def(&c.MaxSendSGE, verbs.DefaultMaxSGE)
	def(&c.MaxRecvSGE, verbs.DefaultMaxSGE)
	if c.MaxInlineData == 0 {
		c.MaxInlineData = verbs.DefaultMaxInlineData
	}
	at := n.attr
	if c.MaxSendWR < 0 || c.MaxSendWR > at.MaxQPWR || c.MaxRecvWR < 0 || c.MaxRecvWR > at.MaxQPWR ||
		c.MaxSendSGE < 0 || c.MaxSendSGE > min(at.MaxSGE, maxSGE) || c.MaxRecvSGE < 0 || c.MaxRecvSGE > min(at.MaxSGE, maxSGE) ||
		c.MaxInlineData < 0 || c.MaxInlineData > at.MaxInlineData {
		return nil, fmt.Errorf("%w: QP capabilities %+v exceed the device's", verbs.ErrInvalidArg, c)
	}
	q := &QP{
		node:   n,
		pd:     pd,
		typ:    a.Type,
		cap:    c,
		sigAll: a.SignalAll,
		mu:     qpLock{biased: a.SingleThreaded},
		limits: verbs.Limits{
			Type:              a.Type,
			MaxSGE:            c.MaxSendSGE,
			MaxInlineData:     c.MaxInlineData,
			MTU:               at.MTU,
			MaxMsgSize:        at.MaxMsgSize,
			MaskedAtomicSizes: at.MaskedAtomicSizes,
			Extra:             prismFlags(a.Type),
			Allocate:          a.Type == verbs.RC,
		},
		conn: qpConn{
			rnrRetry:    verbs.DefaultRNRRetry,
			minRNR:      verbs.DefaultMinRNRTimer,
			retryBudget: verbs.RetryBudget(0, 0),
		},
		send: qpSend{
			cq: scq,
			// Publishing freed slots every quarter queue keeps three
			// quarters usable without asking the CQ.
			reapEvery: uint64(max(c.MaxSendWR/4, 1)),
			prevOK:    true,
		},
		recv: qpRecv{cq: rcq, srq: srq},
	}
	if srq == nil {
		q.recv.rq.init(max(c.MaxRecvWR, 1), max(c.MaxRecvSGE, 1))
		if a.Type == verbs.RC {
			n.publishRecv(&q.recv.rq, pd)
		}
	} else {
		srq.rq.mu.Lock()
		if srq.dead {
			srq.rq.mu.Unlock()
			return nil, fmt.Errorf("%w: SRQ destroyed", verbs.ErrInvalidState)
		}
		srq.users++
		srq.rq.mu.Unlock()
	}
	q.send.sq.init(max(c.MaxSendWR, 1), max(c.MaxSendSGE, 1), c.MaxInlineData)
	q.exec.lmem.sc = &q.exec.sc
	scq.attach(q, scq != rcq || srq == nil)
	rcq.attach(q, false)
	pd.qps.Add(1)
	n.addQP(q)
	q.published()
	return q, nil
}

// QPN implements verbs.QP.
func (q *QP) QPN() uint32 { return q.qpn }

// Type implements verbs.QP.
func (q *QP) Type() verbs.QPType { return q.typ }

// State implements verbs.QP.
func (q *QP) State() verbs.QPState { return verbs.QPState(q.state.Load()) }

// Cap returns the QP's capabilities after defaults.
func (q *QP) Cap() verbs.QPCap { return q.cap }

// Outstanding returns how many send work requests occupy send-queue slots:
// posted and not yet freed by polling a later completion.
func (q *QP) Outstanding() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.syncReaped()
	return int(q.send.posted - q.send.reaped.Load())
}

// reap frees the send-queue slots up to seq; called by CQ.Poll.
func (q *QP) reap(seq uint64) {
	for {
		r := q.send.reaped.Load()
		if seq <= r || q.send.reaped.CompareAndSwap(r, seq) {
			return
		}
	}
}

// Modify implements verbs.QP.
func (q *QP) Modify(a verbs.QPAttr) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.node.closed.Load() {
		return verbs.ErrClosed
	}
	cur := q.State()
	if !verbs.ValidTransition(cur, a.State) {
		return fmt.Errorf("%w: %v → %v", verbs.ErrInvalidTransition, cur, a.State)
	}
	switch a.State {
	case verbs.StateReset:
		q.resetLocked()
		return nil
	case verbs.StateError:
		q.errorLocked()
		return nil
	case verbs.StateInit:
		if a.Access&^(verbs.AccessRemoteRead|verbs.AccessRemoteWrite|verbs.AccessRemoteAtomic|verbs.AccessLocalWrite) != 0 {
			return fmt.Errorf("%w: QP access %v", verbs.ErrInvalidArg, a.Access)
		}
		q.resp.access.Store(uint32(a.Access))
		q.resp.qkey.Store(a.QKey)
	case verbs.StateRTR:
		if q.typ == verbs.RC {
			if q.node.net == nil {
				return fmt.Errorf("%w: node has no network", verbs.ErrInvalidState)
			}
			if a.DestQPN == 0 || a.DestQPN > 0xffffff {
				return fmt.Errorf("%w: destination QPN %d", verbs.ErrInvalidArg, a.DestQPN)
			}
			t, err := q.node.net.Resolve(a.Dest)
			if err != nil {
				return fmt.Errorf("%w: %w", verbs.ErrInvalidArg, err)
			}
			q.setDest(t)
			q.conn.destQPN, q.conn.destQP = a.DestQPN, nil
			q.exec.dmem = memory{d: q.conn.direct, src: q.qpn, qpn: a.DestQPN}
			if q.conn.direct != nil {
				q.exec.dmem.lk = q.conn.direct.Locks()
			}
			q.resp.peer.Store(&connPeer{addr: t.Address(), qpn: a.DestQPN})
			q.conn.epoch++
			q.send.prevOK = true
			q.clearScratch()
		}
		if a.MinRNRTimer > 0 {
			q.conn.minRNR = a.MinRNRTimer
		}
	case verbs.StateRTS:
		switch {
		case a.RNRRetry == verbs.NoRNRRetry:
			q.conn.rnrRetry = 0
		case a.RNRRetry >= verbs.InfiniteRNRRetry:
			q.conn.rnrRetry = -1
		case a.RNRRetry > 0:
			q.conn.rnrRetry = a.RNRRetry
		case a.RNRRetry < 0:
			return fmt.Errorf("%w: RNR retry %d", verbs.ErrInvalidArg, a.RNRRetry)
		case cur != verbs.StateRTS:
			q.conn.rnrRetry = verbs.DefaultRNRRetry
		}
		if a.Timeout > 0 || a.RetryCount > 0 || cur != verbs.StateRTS {
			q.conn.retryBudget = verbs.RetryBudget(a.Timeout, a.RetryCount)
		}
	}
	q.state.Store(uint32(a.State))
	q.published()
	return nil
}

// resetLocked discards every queued request without completions.
func (q *QP) resetLocked() {
	q.state.Store(uint32(verbs.StateReset))
	q.send.sq.clear()
	// Every slot is free again. The counters keep running rather than
	// restart at zero, so completions of the old life still in a CQ cannot
	// free slots of the new one.
	q.reap(q.send.posted)
	if q.recv.srq == nil {
		q.recv.rq.lock()
		q.recv.rq.head = q.recv.rq.tail
		if d := q.recv.rq.dep; d != nil {
			d.area.SetConsumed(q.recv.rq.head)
		}
		q.recv.rq.unlock()
	}
	q.resp.access.Store(0)
	q.resp.peer.Store(nil)
	q.setDest(nil)
	q.conn.destQP, q.conn.destQPN = nil, 0
	q.exec.dmem = memory{}
	q.retx.stop()
	q.published()
}

// setDest records the RC peer, local or remote.
func (q *QP) setDest(t Target) {
	q.conn.dest, q.conn.destNode, q.conn.destLink, q.conn.direct = t, nil, nil, nil
	q.fast.grant = Grant{} // it vouches for the old connection only
	switch d := t.(type) {
	case *Node:
		q.conn.destNode = d
	case Link:
		q.conn.destLink = d
		q.conn.direct, _ = d.(DirectLink)
	}
}

// errorLocked moves the QP to ERROR and flushes the deferred send requests
// and the QP's own receives with StatusWRFlushErr completions.
func (q *QP) errorLocked() {
	q.state.Store(uint32(verbs.StateError))
	q.published()
	q.retx.stop()
	for q.send.sq.len() > 0 {
		e := q.send.sq.front()
		q.completeLocked(&e.wr, e.seq, verbs.StatusWRFlushErr, 0)
		q.send.sq.pop()
	}
	if q.recv.srq != nil {
		return
	}
	q.recv.rq.lock()
	for {
		id, _, ok := q.recv.rq.peek()
		if !ok {
			break
		}
		q.recv.rq.pop()
		wc := verbs.WC{ID: id, Status: verbs.StatusWRFlushErr, Opcode: verbs.WCRecv, QPN: q.qpn}
		q.recv.cq.push(&wc, nil, 0, false)
	}
	q.recv.rq.unlock()
}

// toError moves the QP to ERROR from outside its lock: the state changes
// at once; the flush runs on its own goroutine because the caller may hold
// locks that come after q.mu in the lock order.
func (q *QP) toError() {
	for {
		s := q.state.Load()
		if s == uint32(verbs.StateError) || s == uint32(verbs.StateReset) {
			return
		}
		if q.state.CompareAndSwap(s, uint32(verbs.StateError)) {
			break
		}
	}
	q.published()
	go func() {
		q.mu.Lock()
		if q.State() == verbs.StateError {
			q.errorLocked()
		}
		q.mu.Unlock()
	}()
}

// PostRecv implements verbs.QP.
func (q *QP) PostRecv(wrs []verbs.RecvWR) error {
	if q.recv.srq != nil {
		return &verbs.PostError{Err: fmt.Errorf("%w: QP uses an SRQ", verbs.ErrInvalidArg)}
	}
	if c := q.recv.cq; c.solo.Load() == q {
		c.endSolo(q) // a responder may complete a receive on another goroutine
	}
	s := q.State()
	if s == verbs.StateReset {
		return &verbs.PostError{Err: fmt.Errorf("%w: post receive in %v", verbs.ErrInvalidState, s)}
	}
	if s == verbs.StateError {
		// ibverbs completes receives posted in ERROR with a flush error.
		for i := range wrs {
			if err := verbs.ValidateRecv(&wrs[i], q.recv.rq.maxSGE); err != nil {
				return &verbs.PostError{Index: i, Err: err}
			}
			wc := verbs.WC{ID: wrs[i].ID, Status: verbs.StatusWRFlushErr, Opcode: verbs.WCRecv, QPN: q.qpn}
			q.recv.cq.push(&wc, nil, 0, false)
		}
		return nil
	}
	q.recv.rq.mu.Lock()
	err := q.recv.rq.post(wrs)
	q.recv.rq.mu.Unlock()
	return err
}

// Destroy implements verbs.QP: queued requests are discarded without
// completions, as in ibverbs.
func (q *QP) Destroy() error {
	q.mu.Lock()
	if q.state.Load() == uint32(stateDestroyed) {
		q.mu.Unlock()
		return fmt.Errorf("%w: QP already destroyed", verbs.ErrInvalidState)
	}
	q.resetLocked()
	q.state.Store(uint32(stateDestroyed))
	q.published()
	q.mu.Unlock()
	q.node.removeQP(q)
	if q.recv.srq == nil {
		q.node.unpublishRecv(&q.recv.rq)
	}
	q.send.cq.endSolo(q)
	q.send.cq.users.Add(-1)
	q.recv.cq.users.Add(-1)
	if q.recv.srq != nil {
		q.recv.srq.rq.mu.Lock()
		q.recv.srq.users--
		q.recv.srq.rq.mu.Unlock()
	}
	q.pd.qps.Add(-1)
	return nil
}

// stateDestroyed marks a destroyed QP; it is not a verbs state, so every
// check for a usable state fails.
const stateDestroyed = 255
