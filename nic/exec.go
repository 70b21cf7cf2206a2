package nic

import (
	"encoding/binary"
	"sync/atomic"

	"github.com/rdmakit/rdmakit/verbs"
)

// execute runs one send request against its responder. rnr reports that a
// SEND or WRITE_WITH_IMM found no posted receive (RC only); nothing was
// changed then. inline, when not nil, is the payload copied at post time.
func (q *QP) execute(wr *verbs.SendWR, inline []byte) (st verbs.Status, n uint32, rnr bool) {
	if q.typ == verbs.UD {
		return q.executeUD(wr, inline), 0, false
	}
	dq := q.destQP
	if dq == nil || dq.state.Load() == stateDestroyed {
		dq = q.dest.qp(q.destQPN)
		q.destQP = dq
	}
	if dq == nil || dq.typ != verbs.RC || !receiving(dq) {
		return verbs.StatusRetryExcErr, 0, false
	}
	switch wr.Opcode {
	case verbs.OpRead:
		return q.execRead(wr, dq)
	case verbs.OpWrite, verbs.OpWriteWithImm:
		return q.execWrite(wr, dq, inline)
	case verbs.OpSend, verbs.OpSendWithImm:
		return q.execSend(wr, dq, inline)
	default:
		return q.execAtomic(wr, dq)
	}
}

// receiving reports whether a responder QP accepts requests (RTR or RTS).
func receiving(dq *QP) bool {
	s := dq.state.Load()
	return s == uint32(verbs.StateRTR) || s == uint32(verbs.StateRTS)
}

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
		if m == nil || m.pd != q.pd || (dst && m.access&verbs.AccessLocalWrite == 0) || !m.acquire() {
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

// resolveRemote finds the n bytes at addr under rkey on the responder,
// checking the region's PD and access against the responder QP.
func resolveRemote(dq *QP, rkey uint32, addr, n uint64, need verbs.Access) (*MR, []byte, verbs.Status) {
	m := dq.node.keys.remote(rkey)
	if m == nil || m.pd != dq.pd || m.access&need == 0 || verbs.Access(dq.access.Load())&need == 0 {
		return nil, nil, verbs.StatusRemAccessErr
	}
	if !m.acquire() {
		return nil, nil, verbs.StatusRemAccessErr
	}
	b, ok := m.slice(addr, n)
	if !ok {
		m.release()
		return nil, nil, verbs.StatusRemAccessErr
	}
	return m, b, verbs.StatusSuccess
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
	m, src, st := resolveRemote(dq, wr.RKey, wr.RemoteAddr, total, verbs.AccessRemoteRead)
	if st != verbs.StatusSuccess {
		return st, 0, false
	}
	if n == 1 && total == 8 && wr.RemoteAddr&7 == 0 {
		binary.NativeEndian.PutUint64(q.lbuf[0], atomic.LoadUint64(word(src)))
	} else {
		scatter(q.lbuf[:n], src)
	}
	m.release()
	return verbs.StatusSuccess, uint32(total), false
}

func (q *QP) execWrite(wr *verbs.SendWR, dq *QP, inline []byte) (verbs.Status, uint32, bool) {
	nbuf, nref, total, st := q.payload(wr, inline)
	if st != verbs.StatusSuccess {
		return st, 0, false
	}
	defer q.releaseLocal(nref)
	imm := wr.Opcode == verbs.OpWriteWithImm
	var rq *recvQueue
	var recvID uint64
	if imm {
		rq = dq.recvQueue()
		rq.mu.Lock()
		defer rq.mu.Unlock()
		id, _, ok := rq.peek()
		if !ok {
			return 0, 0, true
		}
		recvID = id
	}
	if total > 0 {
		m, dst, st := resolveRemote(dq, wr.RKey, wr.RemoteAddr, total, verbs.AccessRemoteWrite)
		if st != verbs.StatusSuccess {
			return st, 0, false
		}
		if nbuf == 1 && total == 8 && wr.RemoteAddr&7 == 0 {
			atomic.StoreUint64(word(dst), binary.NativeEndian.Uint64(q.lbuf[0]))
		} else {
			gather(dst, q.lbuf[:nbuf])
		}
		m.release()
	}
	if imm {
		rq.pop()
		wc := verbs.WC{ID: recvID, Opcode: verbs.WCRecvRDMAWithImm, Flags: verbs.WCWithImm, ByteLen: uint32(total),
			Imm: wr.Imm, QPN: dq.qpn, SrcQPN: q.qpn, SrcID: q.node.id}
		sol := wr.Flags&verbs.FlagSolicited != 0
		if sol {
			wc.Flags |= verbs.WCSolicited
		}
		if !dq.recvCQ.push(&wc, nil, 0, sol) {
			dq.toError()
		}
	}
	return verbs.StatusSuccess, uint32(total), false
}

func (q *QP) execAtomic(wr *verbs.SendWR, dq *QP) (verbs.Status, uint32, bool) {
	size := uint64(8)
	if wr.Opcode == verbs.OpMaskedCmpAndSwp || wr.Opcode == verbs.OpMaskedFetchAndAdd {
		size = uint64(wr.Atomic.Size)
	}
	n, st := q.resolveLocal(wr.SGL, true, false)
	if st != verbs.StatusSuccess {
		return st, 0, false
	}
	defer q.releaseLocal(n)
	if n != 1 || uint64(len(q.lbuf[0])) != size {
		return verbs.StatusLocLenErr, 0, false
	}
	if wr.RemoteAddr%size != 0 {
		return verbs.StatusRemInvReqErr, 0, false
	}
	m, mem, st := resolveRemote(dq, wr.RKey, wr.RemoteAddr, size, verbs.AccessRemoteAtomic)
	if st != verbs.StatusSuccess {
		return st, 0, false
	}
	var orig [4]uint64
	dq.node.locks.execAtomic(wr, wr.RemoteAddr, mem, &orig)
	m.release()
	out := q.lbuf[0]
	for i := 0; i < int(size/8); i++ {
		binary.NativeEndian.PutUint64(out[8*i:], orig[i])
	}
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

// deliver puts a message (the q.lbuf[:nbuf] payload of total bytes) into
// the oldest receive of dq and completes it there.
func (q *QP) deliver(wr *verbs.SendWR, dq *QP, nbuf int, total uint64, grh bool) deliverResult {
	rq := dq.recvQueue()
	rq.mu.Lock()
	defer rq.mu.Unlock()
	id, rsgl, ok := rq.peek()
	if !ok {
		return noReceive
	}
	wc := verbs.WC{ID: id, Opcode: verbs.WCRecv, QPN: dq.qpn, SrcQPN: q.qpn, SrcID: q.node.id}
	if wr.Opcode == verbs.OpSendWithImm {
		wc.Flags |= verbs.WCWithImm
		wc.Imm = wr.Imm
	}
	sol := wr.Flags&verbs.FlagSolicited != 0
	if sol {
		wc.Flags |= verbs.WCSolicited
	}
	need := total
	if grh {
		need += verbs.GRHSize
		wc.Flags |= verbs.WCGRH
	}
	res := delivered
	nr, cap, st := q.resolveRecv(dq, rsgl)
	switch {
	case st != verbs.StatusSuccess:
		res, wc.Status = recvProtErr, verbs.StatusLocProtErr
	case cap < need:
		q.releaseRecv(nr)
		res, wc.Status = recvLenErr, verbs.StatusLocLenErr
	default:
		dst := q.rbuf[:nr]
		if grh {
			dst = skipGRH(dst)
		}
		copyLists(dst, q.lbuf[:nbuf])
		q.releaseRecv(nr)
		wc.ByteLen = uint32(need)
	}
	rq.pop()
	if !dq.recvCQ.push(&wc, nil, 0, sol) || (res != delivered && dq.typ == verbs.RC) {
		dq.toError()
	}
	return res
}

// resolveRecv resolves a receive's scatter list on the responder node into
// q.rbuf and q.rmr, returning the entry count and the capacity in bytes.
// The GRH area, when used, is zeroed here.
func (q *QP) resolveRecv(dq *QP, sgl []verbs.SGE) (int, uint64, verbs.Status) {
	n := 0
	var capacity uint64
	for i := range sgl {
		s := &sgl[i]
		if s.Length == 0 {
			continue
		}
		m := dq.node.keys.local(s.LKey)
		if m == nil || m.pd != dq.pd || m.access&verbs.AccessLocalWrite == 0 || !m.acquire() {
			q.releaseRecv(n)
			return 0, 0, verbs.StatusLocProtErr
		}
		b, ok := m.slice(s.Addr, uint64(s.Length))
		if !ok {
			m.release()
			q.releaseRecv(n)
			return 0, 0, verbs.StatusLocProtErr
		}
		q.rbuf[n], q.rmr[n] = b, m
		capacity += uint64(len(b))
		n++
	}
	return n, capacity, verbs.StatusSuccess
}

func (q *QP) releaseRecv(n int) {
	for i := 0; i < n; i++ {
		q.rmr[i].release()
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

func (q *QP) execSend(wr *verbs.SendWR, dq *QP, inline []byte) (verbs.Status, uint32, bool) {
	nbuf, nref, total, st := q.payload(wr, inline)
	if st != verbs.StatusSuccess {
		return st, 0, false
	}
	defer q.releaseLocal(nref)
	switch q.deliver(wr, dq, nbuf, total, false) {
	case noReceive:
		return 0, 0, true
	case recvLenErr:
		return verbs.StatusRemInvReqErr, 0, false
	case recvProtErr:
		return verbs.StatusRemOpErr, 0, false
	}
	return verbs.StatusSuccess, uint32(total), false
}

// executeUD sends a datagram. Datagrams that find no QP, a wrong QKey or
// no receive are dropped silently; the sender sees success either way.
func (q *QP) executeUD(wr *verbs.SendWR, inline []byte) verbs.Status {
	nbuf, nref, total, st := q.payload(wr, inline)
	if st != verbs.StatusSuccess {
		return st
	}
	defer q.releaseLocal(nref)
	dq := wr.AH.(*AH).dest.qp(wr.RemoteQPN)
	if dq == nil || dq.typ != verbs.UD || !receiving(dq) || dq.qkey.Load() != wr.RemoteQKey {
		return verbs.StatusSuccess
	}
	q.deliver(wr, dq, nbuf, total, true)
	return verbs.StatusSuccess
}

// gather copies the buffers of src, in order, into dst and returns the
// number of bytes copied.
func gather(dst []byte, src [][]byte) int {
	off := 0
	for _, b := range src {
		off += copy(dst[off:], b)
	}
	return off
}

// scatter copies src into the buffers of dst, in order.
func scatter(dst [][]byte, src []byte) {
	for _, b := range dst {
		src = src[copy(b, src):]
	}
}

// copyLists copies the bytes of the src list into the dst list.
func copyLists(dst, src [][]byte) {
	di, doff := 0, 0
	for _, s := range src {
		for len(s) > 0 && di < len(dst) {
			k := copy(dst[di][doff:], s)
			s = s[k:]
			doff += k
			if doff == len(dst[di]) {
				di, doff = di+1, 0
			}
		}
	}
}
