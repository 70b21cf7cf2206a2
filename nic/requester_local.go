package nic

import "github.com/rdmakit/rdmakit/verbs"

// The requester toward a responder in this process (loop, or a node
// talking to itself): it admits the request as the responder's NIC would
// — the responder QP exists, is connected to this QP and receives —
// resolves its own scatter list and runs the responder on the poster's
// goroutine. READ bytes and atomic values land straight in the local
// scatter list.

// execute runs one send request against a responder in this process. rnr
// reports that a SEND or WRITE_WITH_IMM found no posted receive (RC only);
// nothing was changed then. inline, when not nil, is the payload copied at
// post time.
func (q *QP) execute(wr *verbs.SendWR, inline []byte) (st verbs.Status, n uint32, rnr bool) {
	if q.typ == verbs.UD {
		return q.executeUD(wr, inline), 0, false
	}
	dq := q.conn.destQP
	if dq == nil || dq.state.Load() == stateDestroyed {
		dq = q.conn.destNode.qp(q.conn.destQPN)
		q.conn.destQP = dq
	}
	if dq == nil || dq.typ != verbs.RC || !dq.accepts(q.node.addr, q.qpn) {
		// No QP, or one not connected to this one: a wrong-source packet,
		// dropped. The requester's timeout is taken at once in-process.
		if dq != nil {
			dq.node.wrongPeer()
		} else if q.conn.destNode != nil {
			q.conn.destNode.wrongPeer()
		}
		return verbs.StatusRetryExcErr, 0, false
	}
	if !receiving(dq) {
		return verbs.StatusRetryExcErr, 0, false
	}
	dq.node.charge()
	// Field by field: every case below sets length, payload and sink, and
	// what only its requests read (src for messages, atomic for atomics).
	r := &q.exec.rreq
	r.op, r.flags, r.rkey, r.addr, r.imm = wr.Opcode, wr.Flags, wr.RKey, wr.RemoteAddr, wr.Imm
	r.arg, r.redirect = wr.ArgAddr, wr.RedirectAddr
	nref := 0
	switch shapeOf(wr.Opcode, wr.Flags) {
	case shapeNone:
		r.length, r.payload, r.sink = uint64(wr.RemoteLen), nil, nil
	case shapePayload:
		nbuf, nr, total, st := q.payload(wr, inline)
		if st != verbs.StatusSuccess {
			return st, 0, false
		}
		nref, r.payload, r.sink, r.length = nr, q.exec.lbuf[:nbuf], nil, total
		r.src = q.source()
		if wr.Opcode == verbs.OpAllocate {
			r.addr = uint64(wr.Queue)
		}
	case shapeSink:
		nl, st := q.resolveLocal(wr.SGL, true, false)
		if st != verbs.StatusSuccess {
			return st, 0, false
		}
		nref, r.payload, r.sink = nl, nil, q.exec.lbuf[:nl]
		r.length = listLen(r.sink)
		if wr.Opcode != verbs.OpRead { // an atomic
			if nl != 1 || r.length != atomicSize(wr.Opcode, &wr.Atomic) {
				q.releaseLocal(nref)
				return verbs.StatusLocLenErr, 0, false
			}
			r.atomic = &wr.Atomic
		}
	}
	o := &q.exec.rout
	mem := &q.exec.lmem
	if mem.dq != dq {
		mem.dq, mem.lk = dq, dq.node.locks
	}
	mem.respond(r, o)
	q.releaseLocal(nref)
	if wr.Opcode == verbs.OpAllocate {
		q.send.result = o.result
	}
	if o.failedCmp {
		q.send.failedCmp = true
	}
	return o.st, o.n, o.rnr
}

// source is how receivers see this QP.
func (q *QP) source() source { return source{qpn: q.qpn, id: q.node.id} }

// source identifies a requester to a responder: its QP number and the
// SrcID the responder reports in receive completions.
type source struct{ qpn, id uint32 }

// executeUD sends a datagram to a node in this process. Datagrams that
// find no QP, a wrong QKey or no receive are dropped silently; the sender
// sees success either way.
func (q *QP) executeUD(wr *verbs.SendWR, inline []byte) verbs.Status {
	nbuf, nref, total, st := q.payload(wr, inline)
	if st != verbs.StatusSuccess {
		return st
	}
	r := &q.exec.rreq
	*r = request{op: wr.Opcode, flags: wr.Flags, imm: wr.Imm, src: q.source(), payload: q.exec.lbuf[:nbuf], length: total}
	deliverUD(wr.AH.(*AH).node, &q.exec.sc, r, wr.RemoteQPN, wr.RemoteQKey)
	r.payload = nil
	q.releaseLocal(nref)
	return verbs.StatusSuccess
}
