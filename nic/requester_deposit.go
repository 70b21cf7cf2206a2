package nic

import "github.com/rdmakit/rdmakit/verbs"

// depositable reports whether a request may be deposited directly into
// the responder's receive queue (Depositor): an RC SEND or SEND_WITH_IMM
// without PRISM flags.
func depositable(wr *verbs.SendWR) bool {
	return (wr.Opcode == verbs.OpSend || wr.Opcode == verbs.OpSendWithImm) && wr.Flags&verbs.FlagsPRISM == 0
}

// execDeposit delivers a SEND into the responder QP's oldest receive
// through a Depositor, on the posting goroutine: the responder's CPU does
// nothing, and the request completes here with no acknowledgement to wait
// for. ok=false means it must go over the link; nothing was done then.
// The caller holds q.mu and has nothing of the QP on the link, so RC
// ordering holds as on the direct one-sided path.
func (q *QP) execDeposit(wr *verbs.SendWR) (st verbs.Status, n uint32, ok bool) {
	dep, is := q.conn.direct.(Depositor)
	if !is || q.typ != verbs.RC {
		return 0, 0, false
	}
	nl, total, st := q.resolveLocalDirect(wr.SGL, false, wr.Flags&verbs.FlagInline != 0)
	if st != verbs.StatusSuccess {
		return st, 0, true
	}
	st, ok = dep.Deposit(q.qpn, q.conn.destQPN, wr.Opcode, wr.Flags, wr.Imm, q.exec.lbuf[:nl], total)
	if !ok {
		return 0, 0, false
	}
	return st, uint32(total), true
}
