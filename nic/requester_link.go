package nic

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// The requester side toward a node in another process. Requests wait in
// the send queue from post to response; which of them are on the wire,
// and what holds the rest back, is the QP's retransmission state
// (retransmit.go). Responses arrive in order per QP. A request the link
// cannot take, or a local error found while building it, completes in
// order with its error.

// sent is the index of the first request not on the wire.
func (q *QP) sent() uint64 { return q.retx.sent(q.send.sq.head) }

// transmitLocked appends every unsent request to the link, in order, and
// marks the link for flushing.
func (q *QP) transmitLocked() {
	if q.retx.hold || q.conn.destLink == nil {
		q.advanceLocked()
		return
	}
	i := q.sent()
	if i == q.send.sq.tail {
		return
	}
	t := q.node.ticks.now()
	q.retx.fenced = false
	for ; i < q.send.sq.tail; i++ {
		e := q.send.sq.at(i)
		if e.pre != verbs.StatusSuccess {
			break
		}
		if q.fenceWaits(i) {
			// Not even gathered yet: its payload may be what an earlier
			// READ or atomic lands. A response resumes transmission.
			q.retx.fenced = true
			break
		}
		st, full := q.appendRequest(q.conn.destLink, e)
		if full {
			q.retx.full = true
			break
		}
		if st != verbs.StatusSuccess {
			e.pre = st
			break
		}
		if q.node.doorbellPerWR && i+1 < q.send.sq.tail {
			// One doorbell per request (guideline ablation): flush this
			// one before the next goes out.
			i++
			q.retx.full = true
			break
		}
	}
	if i > q.sent() {
		q.addFlush(q.conn.destLink)
	}
	q.retx.transmitted(q.send.sq.head, i, t)
	q.advanceLocked()
}

// fenceWaits reports whether the request at index i (not yet on the wire)
// carries FENCE while a READ or atomic before it is still outstanding: it
// must wait for their responses before it is built, its local gather
// included, as the flag promises.
func (q *QP) fenceWaits(i uint64) bool {
	if q.send.sq.at(i).wr.Flags&verbs.FlagFence == 0 {
		return false
	}
	for j := q.send.sq.head; j < i; j++ {
		if op := q.send.sq.at(j).wr.Opcode; op == verbs.OpRead || op.IsAtomic() {
			return true
		}
	}
	return false
}

func (q *QP) addFlush(l Link) {
	for _, x := range q.link.flushing {
		if x == l {
			return
		}
	}
	q.link.flushing = append(q.link.flushing, l)
}

// appendRequest encodes one queued request onto the link. full reports
// that the link took nothing because its queue is full.
func (q *QP) appendRequest(l Link, e *sqEntry) (st verbs.Status, full bool) {
	wr := &e.wr
	r := &q.link.req
	*r = Request{
		SrcQPN: q.qpn, Epoch: q.conn.epoch, Seq: uint32(e.seq), DstQPN: q.conn.destQPN,
		Opcode: wr.Opcode, Flags: wr.Flags, RKey: wr.RKey, RemoteAddr: wr.RemoteAddr, Imm: wr.Imm,
		ArgAddr: wr.ArgAddr, RedirectAddr: wr.RedirectAddr,
	}
	nref := 0
	switch shapeOf(wr.Opcode, wr.Flags) {
	case shapeNone:
		// An INDIRECT_ARG WRITE or a REDIRECT READ: no local bytes.
		r.Length = wr.RemoteLen
	case shapePayload:
		if wr.Opcode == verbs.OpAllocate {
			r.RemoteAddr = uint64(wr.Queue) // the wire carries the queue there
		}
		// The link copies the payload before Append returns, under q.mu:
		// the regions need no references (see resolveLocalDirect).
		var nbuf int
		var total uint64
		if e.inline != nil {
			q.exec.lbuf[0], nbuf, total = e.inline, 1, uint64(len(e.inline))
		} else {
			n, t, st := q.resolveLocalDirect(wr.SGL, false, wr.Flags&verbs.FlagInline != 0)
			if st != verbs.StatusSuccess {
				return st, false
			}
			nbuf, total = n, t
		}
		r.Payload, r.Length = q.exec.lbuf[:nbuf], uint32(total)
	case shapeSink:
		n, st := q.resolveLocal(wr.SGL, true, false)
		if st != verbs.StatusSuccess {
			return st, false
		}
		var total uint64
		for i := 0; i < n; i++ {
			total += uint64(len(q.exec.lbuf[i]))
		}
		q.releaseLocal(n)
		r.Length = uint32(total)
		if wr.Opcode.IsAtomic() {
			if total != atomicSize(wr.Opcode, &wr.Atomic) {
				return verbs.StatusLocLenErr, false
			}
			r.Atomic = wr.Atomic
		}
	}
	err := l.Append(r)
	q.releaseLocal(nref)
	r.Payload = nil
	if errors.Is(err, ErrLinkFull) {
		return verbs.StatusSuccess, true
	}
	if err != nil {
		return verbs.StatusRetryExcErr, false
	}
	return verbs.StatusSuccess, false
}

// advanceLocked completes, in order, requests at the front that failed
// before reaching the wire.
func (q *QP) advanceLocked() {
	for q.send.sq.len() > 0 {
		e := q.send.sq.front()
		if e.pre == verbs.StatusSuccess || q.send.sq.head < q.sent() {
			return
		}
		wr, seq, st := e.wr, e.seq, e.pre
		q.send.sq.pop()
		q.completeLocked(&wr, seq, st, 0)
	}
}

// sendDatagram sends a UD request to another process. Datagrams are not
// acknowledged: it completes once handed to the link.
func (q *QP) sendDatagram(wr *verbs.SendWR, seq uint64, l Link) {
	r := &q.link.req
	*r = Request{
		SrcQPN: q.qpn, Seq: uint32(seq), DstQPN: wr.RemoteQPN, QKey: wr.RemoteQKey, Datagram: true,
		Opcode: wr.Opcode, Flags: wr.Flags, Imm: wr.Imm,
	}
	nbuf, nref, total, st := q.payload(wr, nil)
	if st != verbs.StatusSuccess {
		q.completeLocked(wr, seq, st, 0)
		return
	}
	r.Payload, r.Length = q.exec.lbuf[:nbuf], uint32(total)
	if l.Append(r) == nil {
		q.addFlush(l)
	}
	q.releaseLocal(nref)
	r.Payload = nil
	q.completeLocked(wr, seq, verbs.StatusSuccess, uint32(total))
}

// HandleResponse completes the request a response that arrived on link l
// answers. Transports call it from their reading goroutine. A response
// for a QP whose responder is not behind l is ignored: a node can answer
// only the requests sent to it (isolation.go).
func (n *Node) HandleResponse(l Link, r *Response) {
	q := n.qp(r.SrcQPN)
	if q == nil {
		return
	}
	q.mu.Lock()
	if q.conn.destLink == l {
		q.responseLocked(r)
	}
	q.mu.Unlock()
}

func (q *QP) responseLocked(r *Response) {
	if q.conn.destLink == nil || r.Epoch != q.conn.epoch || q.send.sq.head >= q.sent() {
		return
	}
	e := q.send.sq.front()
	if uint32(e.seq) != r.Seq {
		return // not the oldest request on the wire: stale
	}
	if r.Kind == RespDrop {
		// Discarded unanswered: it fails at the retry budget (Expire),
		// however busy the link (retx.lost).
		q.retx.dropped = true
		return
	}
	if r.Kind == RespRNR {
		if e.rnrLeft == 0 {
			wr, seq := e.wr, e.seq
			q.send.sq.pop()
			q.completeLocked(&wr, seq, rnrExhausted(wr.Opcode), 0)
			return
		}
		if e.rnrLeft > 0 {
			e.rnrLeft--
		}
		q.retx.rnr(q.send.sq.head, now(), q.conn.minRNR)
		if !q.send.running {
			q.send.running = true
			go q.retransmit()
		}
		return
	}
	st, nbytes := r.Status, uint32(0)
	if st == verbs.StatusSuccess {
		st, nbytes = q.land(e, r.Data)
	}
	wr, seq := e.wr, e.seq
	q.send.sq.pop()
	q.completeLocked(&wr, seq, st, nbytes)
	q.retx.answered(q.send.sq.head, q.node.ticks.now())
	q.advanceLocked()
	if q.retx.fenced && !q.retx.hold && !q.send.running && q.sent() < q.send.sq.tail && !q.fenceWaits(q.sent()) {
		// The fence cleared. Transmit and flush on a goroutine of our
		// own: the transport's reading goroutine must not block on a
		// flush.
		q.send.running = true
		go q.retransmit()
	}
}

// land stores a successful response's data: READ bytes or an atomic's
// original value into the local scatter list.
func (q *QP) land(e *sqEntry, data []byte) (verbs.Status, uint32) {
	wr := &e.wr
	switch shapeOf(wr.Opcode, wr.Flags) {
	case shapeNone:
		return verbs.StatusSuccess, wr.RemoteLen
	case shapePayload:
		if wr.Opcode == verbs.OpAllocate && wr.Flags&verbs.FlagRedirect == 0 {
			if len(data) != 8 {
				return verbs.StatusBadRespErr, 0
			}
			q.send.result = binary.NativeEndian.Uint64(data)
		}
		if e.inline != nil {
			return verbs.StatusSuccess, uint32(len(e.inline))
		}
		return verbs.StatusSuccess, uint32(wr.Length())
	}
	n, st := q.resolveLocal(wr.SGL, true, false)
	if st != verbs.StatusSuccess {
		return st, 0
	}
	defer q.releaseLocal(n)
	var total uint64
	for i := 0; i < n; i++ {
		total += uint64(len(q.exec.lbuf[i]))
	}
	if uint64(len(data)) != total && (wr.Flags&verbs.FlagBounded == 0 || uint64(len(data)) > total) {
		return verbs.StatusBadRespErr, 0
	}
	scatter(q.exec.lbuf[:n], data)
	if wr.Opcode.IsAtomic() {
		var orig [4]uint64
		for i := 0; i < len(data)/8 && i < 4; i++ {
			orig[i] = binary.NativeEndian.Uint64(data[8*i:])
		}
		q.noteAtomic(wr, &orig)
	}
	return verbs.StatusSuccess, uint32(len(data))
}

// retransmit sends the held requests again once the RNR timer expires,
// or the requests a FENCE held once it cleared.
func (q *QP) retransmit() {
	q.mu.Lock()
	for q.State() == verbs.StateRTS {
		d := q.retx.holdLeft(now())
		if d == 0 {
			break
		}
		q.mu.Unlock()
		time.Sleep(d)
		q.mu.Lock()
	}
	if q.State() == verbs.StateRTS {
		q.transmitLocked()
	}
	q.send.running = false
	q.pumpAndUnlock()
}

// pumpAndUnlock flushes the links the QP queued requests on, with q.mu
// released, and keeps transmitting what a full link refused until
// everything is on the wire: the caller is held back while the network is
// congested, and queued bytes stay bounded. It is called with q.mu held and
// returns with it released.
func (q *QP) pumpAndUnlock() {
	for {
		if len(q.link.flushing) == 0 && !q.retx.full {
			q.mu.Unlock()
			return
		}
		var fixed [4]Link
		links := fixed[:0]
		if len(q.link.flushing) > len(fixed) {
			links = make([]Link, 0, len(q.link.flushing))
		}
		links = append(links, q.link.flushing...)
		clear(q.link.flushing)
		q.link.flushing = q.link.flushing[:0]
		more := q.retx.full
		link := q.conn.destLink
		q.mu.Unlock()
		for _, l := range links {
			l.Flush() // a failing link reports itself to the node, which fails its QPs
		}
		if more && link != nil && len(links) == 0 {
			link.Flush()
		}
		if !more {
			return
		}
		q.mu.Lock()
		q.retx.full = false
		if q.State() != verbs.StateRTS {
			q.mu.Unlock()
			return
		}
		q.transmitLocked()
	}
}

// Expire fails the oldest request on the wire of every QP whose responder
// has not answered within the QP's retry budget (RETRY_EXC_ERR). A
// transport calls it periodically.
func (n *Node) Expire() {
	n.ticks.tick()
	for _, q := range *n.qps.Load() {
		if q.typ != verbs.RC {
			continue
		}
		q.mu.Lock()
		// Overdue, and lost whatever the link does, or on a link silent
		// for the budget (asked last: Progressed may take locks).
		if l := q.conn.destLink; l != nil && q.retx.overdue(q.send.sq.head, &n.ticks, q.conn.retryBudget) &&
			(q.retx.lostAnyway(&n.ticks, q.conn.retryBudget) || !l.Progressed(q.conn.retryBudget)) {
			q.failFrontLocked(verbs.StatusRetryExcErr)
		}
		q.mu.Unlock()
	}
}

// LinkDown fails every QP whose responder is behind a link that broke: the
// oldest outstanding request completes with RETRY_EXC_ERR and the QP
// moves to ERROR, flushing the rest.
func (n *Node) LinkDown(l Link) {
	for _, q := range *n.qps.Load() {
		q.mu.Lock()
		if q.conn.destLink == l && q.send.sq.len() > 0 {
			q.failFrontLocked(verbs.StatusRetryExcErr)
		}
		q.mu.Unlock()
	}
}

func (q *QP) failFrontLocked(st verbs.Status) {
	e := q.send.sq.front()
	wr, seq := e.wr, e.seq
	q.send.sq.pop()
	q.completeLocked(&wr, seq, st, 0)
}

// ExpireEvery is how often a transport should call Node.Expire.
const ExpireEvery = 10 * time.Millisecond
