package nic

import (
	"sync/atomic"

	"github.com/rdmakit/rdmakit/verbs"
)

// The direct fast path: the common request toward mapped memory — one
// plain READ, WRITE, CAS or FETCH_ADD with one scatter entry, posted alone
// to an RTS QP with nothing queued — runs without the general machinery
// of postLocked and execDirect: no structural validation beyond what that
// shape needs, the local region and the remote region resolved from
// per-QP caches, the copy or the atomic straight on the mapping, and the
// completion written at once. It only ever takes the success case: every
// check that fails, or that it does not know how to make, sends the
// request down the general path, which decides it from scratch (nothing
// has happened yet), so the two paths cannot differ in what a request
// does or how it completes.
//
// The caches, and why they cannot go stale:
//
//   - the local region (fastLocal): the MR of the last lkey. A hit is the
//     same MR with the same lkey, not deregistered (MR.gone, set before
//     MR.Deregister quiesces every QP, so it is seen under q.mu before
//     the region is unmapped); its PD was checked when it was cached.
//   - the remote region (Grant): filled by the DirectLink with the region
//     of the last rkey as mapped here, the responder QP's PD and access,
//     and the words in shared memory whose values vouch for all of it —
//     the responder QP's state word and peer word (Remote's admission)
//     and the region's live word (Remote's deregistration check). A hit
//     is a Grant whose three words still hold the values they had; the
//     access itself is decided by Resolve, the one resolver. The link
//     drops every QP's Grant in Node.Quiesce, under the QP's lock, before
//     it unmaps a mapping or the words, so a Grant never outlives them.

// Grant is a responder's region as a DirectLink resolved it for one QP
// (Grant fills it), cached on the QP for its later direct requests while
// the words it names keep their values.
type Grant struct {
	// RKey is the region's rkey.
	RKey uint32
	// Region is the region as this process maps it (nic.Resolve's view).
	Region Region
	// PD and Access are the responder QP's protection domain and the
	// remote access it grants.
	PD     uint32
	Access verbs.Access
	// State, Peer and Live point to the words in shared memory that
	// vouch for the Grant (State is nil for no Grant) (the responder QP's state word, its peer word,
	// the region's live word); StateWant, PeerWant and LiveWant are their
	// values when it was filled.
	State, Peer, Live             *uint64
	StateWant, PeerWant, LiveWant uint64
}

// holds reports whether the words that vouch for g still hold their
// values: the responder QP receives, is connected to this QP, and the
// region is registered. The state word is read on both sides of the peer
// word, as DirectLink.Remote reads them (the responder writes the peer
// word and then the state word).
func (g *Grant) holds() bool {
	return atomic.LoadUint64(g.State) == g.StateWant && atomic.LoadUint64(g.Peer) == g.PeerWant &&
		atomic.LoadUint64(g.State) == g.StateWant && atomic.LoadUint64(g.Live) == g.LiveWant
}

// qpFast is the fast path's cache on a QP; guarded by mu.
type qpFast struct {
	lmr   *MR   // the region of the last local lkey resolved
	grant Grant // the remote region of the last rkey resolved
}

// fastFlags are the flags a request on the fast path may carry: FENCE
// has nothing to wait for when nothing is queued, SOLICITED means
// nothing to a READ, WRITE or atomic.
const fastFlags = verbs.FlagSignaled | verbs.FlagFence | verbs.FlagSolicited

// postFast runs wr on the fast path if it can and reports whether it did
// (then wr is complete); false means nothing happened. q.mu is held.
func (q *QP) postFast(wr *verbs.SendWR) bool {
	if q.conn.direct == nil || q.State() != verbs.StateRTS || q.send.sq.len() != 0 ||
		wr.Flags&^fastFlags != 0 || len(wr.SGL) != 1 ||
		q.send.posted-q.send.reaped.Load() >= uint64(q.cap.MaxSendWR) {
		return false
	}
	s := &wr.SGL[0]
	n := uint64(s.Length)
	need := plainAccess(wr.Opcode)
	if need == 0 || (need == verbs.AccessRemoteAtomic && (n != 8 || wr.RemoteAddr&7 != 0)) {
		return false
	}
	if n == 0 || n > 1<<31 || (q.limits.MaxMsgSize != 0 && n > q.limits.MaxMsgSize) {
		return false
	}
	local := q.fastLocal(s.LKey, wr.Opcode != verbs.OpWrite)
	if local == nil {
		return false
	}
	lb, ok := local.reg.Slice(s.Addr, n)
	if !ok {
		return false
	}
	g := &q.fast.grant
	if g.State == nil || g.RKey != wr.RKey || !g.holds() { // (no Grant: rkey 0 matches it)
		if !q.conn.direct.Grant(q.qpn, q.conn.destQPN, wr.RKey, g) {
			*g = Grant{}
			return false
		}
	}
	rb, st := Resolve(&g.Region, g.PD, g.Access, wr.RemoteAddr, n, need)
	if st != verbs.StatusSuccess {
		return false
	}
	// Decided: from here on the request takes effect.
	q.send.posted++
	failedCmp := respondPlain(q.exec.dmem.lk, wr.Opcode, &wr.Atomic, wr.RKey, wr.RemoteAddr, rb, lb)
	q.completeFast(wr, uint32(n), failedCmp)
	return true
}

// fastLocal returns the region of lkey if it is one of the QP's PD, not
// deregistered, and writable locally when write is set; else nil.
func (q *QP) fastLocal(lkey uint32, write bool) *MR {
	m := q.fast.lmr
	if m == nil || m.lkey != lkey || m.gone.Load() {
		if m = q.node.keys.local(lkey); m == nil || m.pd != q.pd || m.gone.Load() {
			return nil
		}
		q.fast.lmr = m
	}
	if write && m.reg.Access&verbs.AccessLocalWrite == 0 {
		return nil
	}
	return m
}

// completeFast is completeLocked for a request of the fast path, which
// succeeded: a CAS whose compare failed counts as failed for chaining.
func (q *QP) completeFast(wr *verbs.SendWR, n uint32, failedCmp bool) {
	q.send.prevOK = !failedCmp
	q.send.failedCmp, q.send.result = false, 0
	if wr.Flags&verbs.FlagSignaled == 0 && !q.sigAll {
		return
	}
	c := q.send.cq
	var ok bool
	if c.solo.Load() == q {
		ok = c.pushSolo(wr.ID, verbs.StatusSuccess, verbs.WCOpcodeOf(wr.Opcode), n, 0, q, q.send.posted)
	} else {
		ok = c.pushSend(wr.ID, verbs.StatusSuccess, verbs.WCOpcodeOf(wr.Opcode), n, 0, q, q.send.posted)
	}
	if !ok && q.State() != verbs.StateError {
		q.errorLocked()
	}
}
