package nic

import "github.com/rdmakit/rdmakit/verbs"

// Delivery: how a message reaches the application at the responder. A
// SEND (RC or UD) or the immediate of a WRITE_WITH_IMM consumes the
// oldest posted receive of the responder QP (or its SRQ) and completes it
// on the QP's receive CQ.

// recvQueue is where the QP's incoming SENDs take receives from.
func (q *QP) recvQueue() *recvQueue {
	if q.recv.srq != nil {
		return &q.recv.srq.rq
	}
	return &q.recv.rq
}

// deliverResult is what happened to a message at the responder.
type deliverResult uint8

const (
	delivered   deliverResult = iota
	noReceive                 // no receive posted: RNR on RC, a drop on UD
	recvLenErr                // the receive was too small; it completed with LOC_LEN_ERR
	recvProtErr               // the receive's scatter list was bad; it completed with LOC_PROT_ERR
)

// deliver puts the message of r (its payload, r.length bytes) into the
// oldest receive of dq and completes it there; grh puts a zeroed GRH
// first (UD).
func deliver(dq *QP, sc *scratch, r *request, grh bool) deliverResult {
	rq := dq.recvQueue()
	rq.lock()
	defer rq.unlock()
	id, rsgl, ok := rq.peek()
	if !ok {
		return noReceive
	}
	wc := verbs.WC{ID: id, Opcode: verbs.WCRecv, QPN: dq.qpn, SrcQPN: r.src.qpn, SrcID: r.src.id}
	if r.op == verbs.OpSendWithImm {
		wc.Flags |= verbs.WCWithImm
		wc.Imm = r.imm
	}
	sol := r.flags&verbs.FlagSolicited != 0
	if sol {
		wc.Flags |= verbs.WCSolicited
	}
	need := r.length
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
		copyLists(dst, r.payload)
		sc.releaseRecv(nr)
		wc.ByteLen = uint32(need)
	}
	rq.pop()
	if !dq.recv.cq.push(&wc, nil, 0, sol) || (res != delivered && dq.typ == verbs.RC) {
		dq.toError()
	}
	return res
}

// completeWriteImm completes the receive id that the WRITE_WITH_IMM r
// consumed at dq (whose receive queue lock the caller holds).
func completeWriteImm(dq *QP, id uint64, r *request) {
	wc := verbs.WC{ID: id, Opcode: verbs.WCRecvRDMAWithImm, Flags: verbs.WCWithImm, ByteLen: uint32(r.length),
		Imm: r.imm, QPN: dq.qpn, SrcQPN: r.src.qpn, SrcID: r.src.id}
	sol := r.flags&verbs.FlagSolicited != 0
	if sol {
		wc.Flags |= verbs.WCSolicited
	}
	if !dq.recv.cq.push(&wc, nil, 0, sol) {
		dq.toError()
	}
}

// deliverUD hands the datagram r to the UD QP qpn of node n, or drops it:
// datagrams that find no QP, a wrong QKey or no receive vanish.
func deliverUD(n *Node, sc *scratch, r *request, qpn, qkey uint32) {
	dq := n.qp(qpn)
	if dq == nil || dq.typ != verbs.UD || !receiving(dq) || dq.resp.qkey.Load() != qkey {
		return
	}
	deliver(dq, sc, r, true)
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
