package nic

import (
	"encoding/binary"
	"sync/atomic"

	"github.com/rdmakit/rdmakit/verbs"
)

// DirectLink is a Link to a responder whose memory this process maps (the
// shm transport). One-sided operations — READ, WRITE and the atomics — run
// on the posting goroutine against the mapping, without the responder's
// CPU, whenever nothing earlier of the QP is still on the link (so the
// QP's requests still take effect in order); everything else goes over
// the link.
type DirectLink interface {
	Link
	// Remote returns the n bytes at addr under rkey in the responder's
	// memory, as this process maps them, after the checks a responder
	// makes for its QP qpn: the QP receives (else RETRY_EXC_ERR); the
	// region exists, its PD is the QP's and both grant need, and the bytes
	// lie inside it (else REMOTE_ACCESS_ERR). ok=false means the link
	// cannot decide here (for instance the region is not mapped yet): the
	// request then goes over the link. The bytes stay mapped at least
	// until the caller releases the QP's lock (see Node.Quiesce).
	Remote(qpn, rkey uint32, addr, n uint64, need verbs.Access) (mem []byte, st verbs.Status, ok bool)
	// Locks returns the responder node's atomics locks.
	Locks() AtomicLocks
}

// Quiesce waits until no direct operation over l that started before the
// call is still running: it takes and releases the lock of every RC QP
// connected through l. A transport calls it, holding no QP lock, before it
// unmaps memory it handed out from DirectLink.Remote.
func (n *Node) Quiesce(l Link) {
	for _, q := range *n.qps.Load() {
		if q.typ != verbs.RC {
			continue
		}
		q.mu.Lock()
		busy := q.destLink == l // the wait is the point; the test keeps the section non-empty
		q.mu.Unlock()
		_ = busy
	}
}

// oneSided reports whether op runs directly over a DirectLink.
func oneSided(op verbs.Opcode) bool {
	return op == verbs.OpRead || op == verbs.OpWrite || op.IsAtomic()
}

// execDirect runs a one-sided request against the responder's mapped
// memory. ok=false means it must go over the link; nothing was done then.
func (q *QP) execDirect(wr *verbs.SendWR) (st verbs.Status, n uint32, ok bool) {
	d := q.direct
	switch wr.Opcode {
	case verbs.OpRead:
		nl, st := q.resolveLocal(wr.SGL, true, false)
		if st != verbs.StatusSuccess {
			return st, 0, true
		}
		defer q.releaseLocal(nl)
		var total uint64
		for i := 0; i < nl; i++ {
			total += uint64(len(q.lbuf[i]))
		}
		src, st, ok := d.Remote(q.destQPN, wr.RKey, wr.RemoteAddr, total, verbs.AccessRemoteRead)
		if !ok || st != verbs.StatusSuccess {
			return st, 0, ok
		}
		if nl == 1 && total == 8 && wr.RemoteAddr&7 == 0 {
			binary.NativeEndian.PutUint64(q.lbuf[0], atomic.LoadUint64(word(src)))
		} else {
			scatter(q.lbuf[:nl], src)
		}
		return verbs.StatusSuccess, uint32(total), true
	case verbs.OpWrite:
		nbuf, nref, total, st := q.payload(wr, nil)
		if st != verbs.StatusSuccess {
			return st, 0, true
		}
		defer q.releaseLocal(nref)
		dst, st, ok := d.Remote(q.destQPN, wr.RKey, wr.RemoteAddr, total, verbs.AccessRemoteWrite)
		if !ok || st != verbs.StatusSuccess {
			return st, 0, ok
		}
		if nbuf == 1 && total == 8 && wr.RemoteAddr&7 == 0 {
			atomic.StoreUint64(word(dst), binary.NativeEndian.Uint64(q.lbuf[0]))
		} else {
			gather(dst, q.lbuf[:nbuf])
		}
		return verbs.StatusSuccess, uint32(total), true
	}
	size := atomicSize(wr.Opcode, &wr.Atomic)
	nl, st := q.resolveLocal(wr.SGL, true, false)
	if st != verbs.StatusSuccess {
		return st, 0, true
	}
	defer q.releaseLocal(nl)
	if nl != 1 || uint64(len(q.lbuf[0])) != size {
		return verbs.StatusLocLenErr, 0, true
	}
	if (size != 8 && size != 16 && size != 32) || wr.RemoteAddr%size != 0 {
		return verbs.StatusRemInvReqErr, 0, true
	}
	mem, st, ok := d.Remote(q.destQPN, wr.RKey, wr.RemoteAddr, size, verbs.AccessRemoteAtomic)
	if !ok || st != verbs.StatusSuccess {
		return st, 0, ok
	}
	var orig [4]uint64
	execAtomic(d.Locks(), wr.Opcode, &wr.Atomic, wr.RKey, wr.RemoteAddr, mem, &orig)
	putWords(q.lbuf[0], &orig)
	return verbs.StatusSuccess, uint32(size), true
}
