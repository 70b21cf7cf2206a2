package nic

import (
	"github.com/rdmakit/rdmakit/verbs"
)

// execute runs one send request against a responder in this process. rnr
// reports that a SEND or WRITE_WITH_IMM found no posted receive (RC only);
// nothing was changed then. inline, when not nil, is the payload copied at
// post time.
func (q *QP) execute(wr *verbs.SendWR, inline []byte) (st verbs.Status, n uint32, rnr bool) {
	if q.typ == verbs.UD {
		return q.executeUD(wr, inline), 0, false
	}
	dq := q.destQP
	if dq == nil || dq.state.Load() == stateDestroyed {
		dq = q.destNode.qp(q.destQPN)
		q.destQP = dq
	}
	if dq == nil || dq.typ != verbs.RC || !dq.accepts(q.node.addr, q.qpn) {
		// No QP, or one not connected to this one: a wrong-source packet,
		// dropped. The requester's timeout is taken at once in-process.
		if dq != nil {
			dq.node.wrongPeer()
		} else if q.destNode != nil {
			q.destNode.wrongPeer()
		}
		return verbs.StatusRetryExcErr, 0, false
	}
	if !receiving(dq) {
		return verbs.StatusRetryExcErr, 0, false
	}
	dq.node.charge()
	switch wr.Opcode {
	case verbs.OpRead:
		if wr.Flags&verbs.FlagRedirect != 0 {
			st, n := redirectRead(dq, wr.RKey, wr.RemoteAddr, uint64(wr.RemoteLen), wr.Flags, wr.RedirectAddr)
			return st, n, false
		}
		return q.execRead(wr, dq)
	case verbs.OpAllocate:
		nbuf, nref, total, st := q.payload(wr, inline)
		if st != verbs.StatusSuccess {
			return st, 0, false
		}
		st, q.result = respondAllocate(dq, wr.RKey, wr.Queue, wr.Flags, wr.RedirectAddr, q.lbuf[:nbuf], total)
		q.releaseLocal(nref)
		if st == verbs.StatusRemOpErr { // an empty free list: NAKed like a SEND without a receive
			return st, 0, true
		}
		return st, uint32(total), false
	case verbs.OpWrite, verbs.OpWriteWithImm, verbs.OpSend, verbs.OpSendWithImm:
		if wr.Flags&verbs.FlagIndirectArg != 0 {
			return argWrite(dq, wr.RKey, wr.RemoteAddr, uint64(wr.RemoteLen), wr.Flags, wr.ArgAddr), wr.RemoteLen, false
		}
		nbuf, nref, total, st := q.payload(wr, inline)
		if st != verbs.StatusSuccess {
			return st, 0, false
		}
		st, rnr = respond(dq, &q.sc, q.source(), wr.Opcode, wr.Flags, wr.RKey, wr.RemoteAddr, wr.Imm, q.lbuf[:nbuf], total)
		q.releaseLocal(nref)
		return st, uint32(total), rnr
	default:
		return q.execAtomic(wr, dq)
	}
}

// source is how receivers see this QP.
func (q *QP) source() source { return source{qpn: q.qpn, id: q.node.id} }

// source identifies a requester to a responder: its QP number and the
// SrcID the responder reports in receive completions.
type source struct{ qpn, id uint32 }

// resolveLocal resolves a local scatter list into q.lbuf and q.lmr,
// acquiring each region. dst says the memory is written (needs
// AccessLocalWrite). inline says the list is an INLINE payload, which
// needs no lkey: an entry whose lkey names no region of the QP's PD is
// looked up by address among the PD's regions. Zero-length entries are
// skipped.
func (q *QP) resolveLocal(sgl []verbs.SGE, dst, inline bool) (int, verbs.Status) {
	n := 0
	for i := range sgl {
		s := &sgl[i]
		if s.Length == 0 {
			continue
		}
		m := q.node.keys.local(s.LKey)
		if inline && (m == nil || m.pd != q.pd) {
			m = q.node.keys.containing(q.pd, s.Addr, uint64(s.Length))
		}
		if m == nil || m.pd != q.pd || (dst && m.reg.Access&verbs.AccessLocalWrite == 0) || !m.acquire() {
			q.releaseLocal(n)
			return 0, verbs.StatusLocProtErr
		}
		b, ok := m.slice(s.Addr, uint64(s.Length))
		if !ok {
			m.release()
			q.releaseLocal(n)
			return 0, verbs.StatusLocProtErr
		}
		q.lbuf[n], q.lmr[n] = b, m
		n++
	}
	return n, verbs.StatusSuccess
}

func (q *QP) releaseLocal(n int) {
	for i := 0; i < n; i++ {
		q.lmr[i].release()
	}
}

// payload resolves the bytes a SEND or WRITE carries: the inline copy or
// the local scatter list. It returns the number of q.lbuf entries, how
// many of them hold region references, and the total length.
func (q *QP) payload(wr *verbs.SendWR, inline []byte) (nbuf, nref int, total uint64, st verbs.Status) {
	if inline != nil {
		q.lbuf[0] = inline
		return 1, 0, uint64(len(inline)), verbs.StatusSuccess
	}
	n, st := q.resolveLocal(wr.SGL, false, wr.Flags&verbs.FlagInline != 0)
	if st != verbs.StatusSuccess {
		return 0, 0, 0, st
	}
	for i := 0; i < n; i++ {
		total += uint64(len(q.lbuf[i]))
	}
	return n, n, total, verbs.StatusSuccess
}

func (q *QP) execRead(wr *verbs.SendWR, dq *QP) (verbs.Status, uint32, bool) {
	n, st := q.resolveLocal(wr.SGL, true, false)
	if st != verbs.StatusSuccess {
		return st, 0, false
	}
	defer q.releaseLocal(n)
	var total uint64
	for i := 0; i < n; i++ {
		total += uint64(len(q.lbuf[i]))
	}
	if total == 0 {
		return verbs.StatusSuccess, 0, false
	}
	m, src, st := resolveTarget(dq, wr.RKey, wr.RemoteAddr, total, wr.Flags, verbs.AccessRemoteRead)
	if st != verbs.StatusSuccess {
		return st, 0, false
	}
	readMem(q.lbuf[:n], src)
	m.release()
	return verbs.StatusSuccess, uint32(len(src)), false
}

// respond executes a WRITE, WRITE_WITH_IMM, SEND or SEND_WITH_IMM at the
// responder QP dq with the payload list of total bytes. It is the
// responder half shared by requesters in this process and by transports
// serving requests from other processes. rnr reports a missing receive;
// nothing was changed then.
func respond(dq *QP, sc *scratch, src source, op verbs.Opcode, flags verbs.SendFlags, rkey uint32, addr uint64, imm uint32,
	payload [][]byte, total uint64) (verbs.Status, bool) {
	switch op {
	case verbs.OpSend, verbs.OpSendWithImm:
		switch deliver(dq, sc, src, op, flags, imm, payload, total, false) {
		case noReceive:
			return 0, true
		case recvLenErr:
			return verbs.StatusRemInvReqErr, false
		case recvProtErr:
			return verbs.StatusRemOpErr, false
		}
		return verbs.StatusSuccess, false
	}
	withImm := op == verbs.OpWriteWithImm
	var rq *recvQueue
	var recvID uint64
	if withImm {
		rq = dq.recvQueue()
		rq.mu.Lock()
		defer rq.mu.Unlock()
		id, _, ok := rq.peek()
		if !ok {
			return 0, true
		}
		recvID = id
	}
	if total > 0 {
		m, dst, st := resolveTarget(dq, rkey, addr, total, flags, verbs.AccessRemoteWrite)
		if st != verbs.StatusSuccess {
			return st, false
		}
		writeMem(dst, payload)
		m.release()
	}
	if withImm {
		rq.pop()
		wc := verbs.WC{ID: recvID, Opcode: verbs.WCRecvRDMAWithImm, Flags: verbs.WCWithImm, ByteLen: uint32(total),
			Imm: imm, QPN: dq.qpn, SrcQPN: src.qpn, SrcID: src.id}
		sol := flags&verbs.FlagSolicited != 0
		if sol {
			wc.Flags |= verbs.WCSolicited
		}
		if !dq.recvCQ.push(&wc, nil, 0, sol) {
			dq.toError()
		}
	}
	return verbs.StatusSuccess, false
}

// atomicSize is the operand size of an atomic opcode.
func atomicSize(op verbs.Opcode, a *verbs.AtomicArgs) uint64 {
	if op == verbs.OpMaskedCmpAndSwp || op == verbs.OpMaskedFetchAndAdd {
		return uint64(a.Size)
	}
	return 8
}

// respondAtomic executes an atomic at the responder QP dq and stores the
// original value in orig.
func respondAtomic(dq *QP, op verbs.Opcode, a *verbs.AtomicArgs, rkey uint32, addr uint64, flags verbs.SendFlags, arg uint64, orig *[4]uint64) verbs.Status {
	size := atomicSize(op, a)
	if size != 8 && size != 16 && size != 32 {
		return verbs.StatusRemInvReqErr
	}
	if flags&verbs.FlagIndirect != 0 {
		// The target is the pointee of the slot at addr, in the same region.
		if addr%8 != 0 {
			return verbs.StatusRemInvReqErr
		}
		m, slot, st := resolveRemote(dq, rkey, addr, 8, verbs.AccessRemoteAtomic)
		if st != verbs.StatusSuccess {
			return st
		}
		ptr, _ := readSlot(dq.node.locks, addr, slot)
		_, inRegion := m.slice(ptr, size)
		m.release()
		if !inRegion {
			return verbs.StatusRemAccessErr
		}
		addr = ptr
	}
	if addr%size != 0 || (flags&verbs.FlagIndirectArg != 0 && arg%8 != 0) {
		return verbs.StatusRemInvReqErr
	}
	if flags&verbs.FlagIndirectArg != 0 {
		ac := *a
		if st := loadArg(dq, rkey, arg, size, &ac); st != verbs.StatusSuccess {
			return st
		}
		a = &ac
	}
	m, mem, st := resolveRemote(dq, rkey, addr, size, verbs.AccessRemoteAtomic)
	if st != verbs.StatusSuccess {
		return st
	}
	execAtomic(dq.node.locks, op, a, rkey, addr, mem, orig)
	m.release()
	return verbs.StatusSuccess
}

func (q *QP) execAtomic(wr *verbs.SendWR, dq *QP) (verbs.Status, uint32, bool) {
	size := atomicSize(wr.Opcode, &wr.Atomic)
	n, st := q.resolveLocal(wr.SGL, true, false)
	if st != verbs.StatusSuccess {
		return st, 0, false
	}
	defer q.releaseLocal(n)
	if n != 1 || uint64(len(q.lbuf[0])) != size {
		return verbs.StatusLocLenErr, 0, false
	}
	var orig [4]uint64
	if st := respondAtomic(dq, wr.Opcode, &wr.Atomic, wr.RKey, wr.RemoteAddr, wr.Flags, wr.ArgAddr, &orig); st != verbs.StatusSuccess {
		return st, 0, false
	}
	q.noteAtomic(wr, &orig)
	putWords(q.lbuf[0], &orig)
	return verbs.StatusSuccess, uint32(size), false
}

// recvQueue is where the QP's incoming SENDs take receives from.
func (q *QP) recvQueue() *recvQueue {
	if q.srq != nil {
		return &q.srq.rq
	}
	return &q.rq
}

// deliverResult is what happened to a message at the responder.
type deliverResult uint8

const (
	delivered   deliverResult = iota
	noReceive                 // no receive posted: RNR on RC, a drop on UD
	recvLenErr                // the receive was too small; it completed with LOC_LEN_ERR
	recvProtErr               // the receive's scatter list was bad; it completed with LOC_PROT_ERR
)

// scratch holds a responder's resolved receive scatter list, so delivery
// allocates nothing. Its owner serialises its use.
type scratch struct {
	rbuf [maxSGE][]byte
	rmr  [maxSGE]*MR
}

// deliver puts a message (the payload list of total bytes) into the
// oldest receive of dq and completes it there.
func deliver(dq *QP, sc *scratch, src source, op verbs.Opcode, flags verbs.SendFlags, imm uint32, payload [][]byte, total uint64, grh bool) deliverResult {
	rq := dq.recvQueue()
	rq.mu.Lock()
	defer rq.mu.Unlock()
	id, rsgl, ok := rq.peek()
	if !ok {
		return noReceive
	}
	wc := verbs.WC{ID: id, Opcode: verbs.WCRecv, QPN: dq.qpn, SrcQPN: src.qpn, SrcID: src.id}
	if op == verbs.OpSendWithImm {
		wc.Flags |= verbs.WCWithImm
		wc.Imm = imm
	}
	sol := flags&verbs.FlagSolicited != 0
	if sol {
		wc.Flags |= verbs.WCSolicited
	}
	need := total
	if grh {
		need += verbs.GRHSize
		wc.Flags |= verbs.WCGRH
	}
	res := delivered
	nr, capacity, st := sc.resolveRecv(dq, rsgl)
	switch {
	case st != verbs.StatusSuccess:
		res, wc.Status = recvProtErr, verbs.StatusLocProtErr
	case capacity < need:
		sc.releaseRecv(nr)
		res, wc.Status = recvLenErr, verbs.StatusLocLenErr
	default:
		dst := sc.rbuf[:nr]
		if grh {
			dst = skipGRH(dst)
		}
		copyLists(dst, payload)
		sc.releaseRecv(nr)
		wc.ByteLen = uint32(need)
	}
	rq.pop()
	if !dq.recvCQ.push(&wc, nil, 0, sol) || (res != delivered && dq.typ == verbs.RC) {
		dq.toError()
	}
	return res
}

// resolveRecv resolves a receive's scatter list on the responder node into
// sc.rbuf and sc.rmr, returning the entry count and the capacity in bytes.
func (sc *scratch) resolveRecv(dq *QP, sgl []verbs.SGE) (int, uint64, verbs.Status) {
	n := 0
	var capacity uint64
	for i := range sgl {
		s := &sgl[i]
		if s.Length == 0 {
			continue
		}
		m := dq.node.keys.local(s.LKey)
		if m == nil || m.pd != dq.pd || m.reg.Access&verbs.AccessLocalWrite == 0 || !m.acquire() {
			sc.releaseRecv(n)
			return 0, 0, verbs.StatusLocProtErr
		}
		b, ok := m.slice(s.Addr, uint64(s.Length))
		if !ok {
			m.release()
			sc.releaseRecv(n)
			return 0, 0, verbs.StatusLocProtErr
		}
		sc.rbuf[n], sc.rmr[n] = b, m
		capacity += uint64(len(b))
		n++
	}
	return n, capacity, verbs.StatusSuccess
}

func (sc *scratch) releaseRecv(n int) {
	for i := 0; i < n; i++ {
		sc.rmr[i].release()
	}
}

// skipGRH zeroes the first GRHSize bytes of a scatter list and returns the
// list of what follows (reusing the list's backing array).
func skipGRH(dst [][]byte) [][]byte {
	skip := verbs.GRHSize
	for len(dst) > 0 && skip > 0 {
		k := min(skip, len(dst[0]))
		clear(dst[0][:k])
		dst[0] = dst[0][k:]
		skip -= k
		if len(dst[0]) == 0 {
			dst = dst[1:]
		}
	}
	return dst
}

// executeUD sends a datagram to a node in this process. Datagrams that
// find no QP, a wrong QKey or no receive are dropped silently; the sender
// sees success either way.
func (q *QP) executeUD(wr *verbs.SendWR, inline []byte) verbs.Status {
	nbuf, nref, total, st := q.payload(wr, inline)
	if st != verbs.StatusSuccess {
		return st
	}
	defer q.releaseLocal(nref)
	deliverUD(wr.AH.(*AH).node, &q.sc, q.source(), wr.RemoteQPN, wr.RemoteQKey, wr.Opcode, wr.Flags, wr.Imm, q.lbuf[:nbuf], total)
	return verbs.StatusSuccess
}

// deliverUD hands a datagram to the UD QP qpn of node n, or drops it.
func deliverUD(n *Node, sc *scratch, src source, qpn, qkey uint32, op verbs.Opcode, flags verbs.SendFlags, imm uint32, payload [][]byte, total uint64) {
	dq := n.qp(qpn)
	if dq == nil || dq.typ != verbs.UD || !receiving(dq) || dq.qkey.Load() != qkey {
		return
	}
	deliver(dq, sc, src, op, flags, imm, payload, total, true)
}
