package nic

import (
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
	// makes for its QP qpn: the QP is connected to this node's QP src
	// (else ok=false, so that the responder drops the request: see
	// isolation.go); the QP receives (else RETRY_EXC_ERR); the
	// region exists, its PD is the QP's and both grant need, and the bytes
	// lie inside it (else REMOTE_ACCESS_ERR). ok=false means the link
	// cannot decide here (for instance the region is not mapped yet): the
	// request then goes over the link. The bytes stay mapped at least
	// until the caller releases the QP's lock (see Node.Quiesce).
	Remote(src, qpn, rkey uint32, addr, n uint64, need verbs.Access) (mem []byte, st verbs.Status, ok bool)
	// Locks returns the responder node's atomics locks.
	Locks() AtomicLocks
	// Enter and Exit bracket a PRISM operation run directly (an indirect
	// READ), so that the responder's MR.Quiesce waits for it as it waits
	// for the operations its own nic runs.
	Enter()
	Exit()
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

// oneSided reports whether a request runs directly over a DirectLink:
// plain READ, WRITE and atomics, and INDIRECT (BOUNDED) READs; the other
// PRISM operations go over the link.
func oneSided(wr *verbs.SendWR) bool {
	op := wr.Opcode
	if f := wr.Flags & verbs.FlagsPRISM; f != 0 {
		return op == verbs.OpRead && f&^(verbs.FlagIndirect|verbs.FlagBounded) == 0
	}
	return op == verbs.OpRead || op == verbs.OpWrite || op.IsAtomic()
}

// indirectReadDirect runs an INDIRECT READ of total bytes into the nl
// local buffers against the responder's mapping, bracketed for the
// responder's Quiesce. ok=false: go over the link.
func (q *QP) indirectReadDirect(wr *verbs.SendWR, nl int, total uint64) (verbs.Status, uint32, bool) {
	d := q.direct
	slotLen, align := uint64(8), uint64(8)
	if wr.Flags&verbs.FlagBounded != 0 {
		slotLen, align = 16, 16
	}
	if wr.RemoteAddr%align != 0 {
		return verbs.StatusRemInvReqErr, 0, true
	}
	d.Enter()
	defer d.Exit()
	slot, st, ok := d.Remote(q.qpn, q.destQPN, wr.RKey, wr.RemoteAddr, slotLen, verbs.AccessRemoteRead)
	if !ok || st != verbs.StatusSuccess {
		return st, 0, ok
	}
	ptr, bound := readSlot(d.Locks(), wr.RemoteAddr, slot)
	if wr.Flags&verbs.FlagBounded != 0 && bound < total {
		total = bound
	}
	src, st, ok := d.Remote(q.qpn, q.destQPN, wr.RKey, ptr, total, verbs.AccessRemoteRead)
	if !ok {
		return 0, 0, false
	}
	if st != verbs.StatusSuccess {
		return st, 0, true
	}
	scatter(q.lbuf[:nl], src)
	return verbs.StatusSuccess, uint32(len(src)), true
}

// execDirect runs a one-sided request against the responder's mapped
// memory. ok=false means it must go over the link; nothing was done then.
func (q *QP) execDirect(wr *verbs.SendWR) (st verbs.Status, n uint32, ok bool) {
	d := q.direct
	switch wr.Opcode {
	case verbs.OpRead:
		nl, st := q.resolveLocalDirect(wr.SGL, true, false)
		if st != verbs.StatusSuccess {
			return st, 0, true
		}
		var total uint64
		for i := 0; i < nl; i++ {
			total += uint64(len(q.lbuf[i]))
		}
		if total == 0 {
			// Nothing to copy, but the responder still answers (a liveness
			// probe): only it can tell that its QP receives or that it is
			// gone, so the request goes over the link.
			return 0, 0, false
		}
		if wr.Flags&verbs.FlagIndirect != 0 {
			return q.indirectReadDirect(wr, nl, total)
		}
		src, st, ok := d.Remote(q.qpn, q.destQPN, wr.RKey, wr.RemoteAddr, total, verbs.AccessRemoteRead)
		if ok && st == verbs.StatusSuccess {
			readMem(q.lbuf[:nl], src)
		}
		return st, uint32(total), ok
	case verbs.OpWrite:
		nbuf, st := q.resolveLocalDirect(wr.SGL, false, wr.Flags&verbs.FlagInline != 0)
		if st != verbs.StatusSuccess {
			return st, 0, true
		}
		var total uint64
		for i := 0; i < nbuf; i++ {
			total += uint64(len(q.lbuf[i]))
		}
		if total == 0 {
			return 0, 0, false // as a 0-byte READ
		}
		dst, st, ok := d.Remote(q.qpn, q.destQPN, wr.RKey, wr.RemoteAddr, total, verbs.AccessRemoteWrite)
		if ok && st == verbs.StatusSuccess {
			writeMem(dst, q.lbuf[:nbuf])
		}
		return st, uint32(total), ok
	}
	size := atomicSize(wr.Opcode, &wr.Atomic)
	nl, st := q.resolveLocalDirect(wr.SGL, true, false)
	if st != verbs.StatusSuccess {
		return st, 0, true
	}
	st, ok = q.atomicDirect(wr, size, nl)
	return st, uint32(size), ok
}

// atomicDirect runs an atomic whose local buffer q.lbuf resolved (nl
// entries) against the responder's mapped memory.
func (q *QP) atomicDirect(wr *verbs.SendWR, size uint64, nl int) (verbs.Status, bool) {
	if nl != 1 || uint64(len(q.lbuf[0])) != size {
		return verbs.StatusLocLenErr, true
	}
	if (size != 8 && size != 16 && size != 32) || wr.RemoteAddr%size != 0 {
		return verbs.StatusRemInvReqErr, true
	}
	d := q.direct
	mem, st, ok := d.Remote(q.qpn, q.destQPN, wr.RKey, wr.RemoteAddr, size, verbs.AccessRemoteAtomic)
	if !ok || st != verbs.StatusSuccess {
		return st, ok
	}
	var orig [4]uint64
	execAtomic(d.Locks(), wr.Opcode, &wr.Atomic, wr.RKey, wr.RemoteAddr, mem, &orig)
	q.noteAtomic(wr, &orig)
	putWords(q.lbuf[0], &orig)
	return verbs.StatusSuccess, true
}

// resolveLocalDirect is resolveLocal for the direct path, which runs with
// q.mu held from start to end: instead of pinning each region with a
// reference it relies on MR.Deregister quiescing every QP (taking its lock)
// before it unmaps, so a region found here stays mapped until q.mu is
// released.
func (q *QP) resolveLocalDirect(sgl []verbs.SGE, dst, inline bool) (int, verbs.Status) {
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
		if m == nil || m.pd != q.pd || (dst && m.reg.Access&verbs.AccessLocalWrite == 0) || m.gone.Load() {
			return 0, verbs.StatusLocProtErr
		}
		b, ok := m.slice(s.Addr, uint64(s.Length))
		if !ok {
			return 0, verbs.StatusLocProtErr
		}
		q.lbuf[n] = b
		n++
	}
	return n, verbs.StatusSuccess
}

// quiesceQPs waits until no QP of the node is inside a critical section
// that started before the call (see resolveLocalDirect).
func (n *Node) quiesceQPs() {
	for _, q := range *n.qps.Load() {
		q.mu.Lock()
		busy := q.direct != nil // the wait is the point; the test keeps the section non-empty
		q.mu.Unlock()
		_ = busy
	}
}
