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
	// Grant fills g with the region of rkey for the requests of this
	// node's QP src to the responder's QP qpn, when Remote would admit
	// them now (the link is up, the responder QP is connected to src and
	// receives, the region is mapped here and registered) but for the
	// access and bounds of each request, which the caller decides with
	// Resolve. It reports false, leaving g undefined, otherwise. g holds
	// until one of the words it names changes, or until the link calls
	// Node.Quiesce, before which the memory g names stays mapped.
	Grant(src, qpn, rkey uint32, g *Grant) bool
	// Locks returns the responder node's atomics locks.
	Locks() AtomicLocks
	// Enter and Exit bracket a PRISM operation run directly (an indirect
	// READ), so that the responder's MR.Quiesce waits for it as it waits
	// for the operations its own nic runs.
	Enter()
	Exit()
}

// Quiesce waits until no direct operation over l that started before the
// call is still running, and drops the Grants of l the QPs cached: it
// takes and releases the lock of every RC QP connected through l. A
// transport calls it, holding no QP lock, before it unmaps memory it
// handed out from DirectLink.Remote or DirectLink.Grant.
func (n *Node) Quiesce(l Link) {
	for _, q := range *n.qps.Load() {
		if q.typ != verbs.RC {
			continue
		}
		q.mu.Lock()
		if q.conn.destLink == l {
			q.fast.grant = Grant{}
		}
		q.mu.Unlock()
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

// execDirect runs a one-sided request through the responder against the
// responder's mapped memory. ok=false means it must go over the link;
// nothing was done then.
func (q *QP) execDirect(wr *verbs.SendWR) (st verbs.Status, n uint32, ok bool) {
	r := &q.exec.rreq
	r.op, r.flags, r.rkey, r.addr, r.atomic, r.arg = wr.Opcode, wr.Flags, wr.RKey, wr.RemoteAddr, &wr.Atomic, wr.ArgAddr
	var nl int
	if wr.Opcode == verbs.OpWrite {
		nl, r.length, st = q.resolveLocalDirect(wr.SGL, false, wr.Flags&verbs.FlagInline != 0)
		r.payload, r.sink = q.exec.lbuf[:nl], nil
	} else {
		nl, r.length, st = q.resolveLocalDirect(wr.SGL, true, false)
		r.payload, r.sink = nil, q.exec.lbuf[:nl]
	}
	if st != verbs.StatusSuccess {
		return st, 0, true
	}
	n = uint32(r.length)
	if wr.Opcode != verbs.OpRead && wr.Opcode != verbs.OpWrite { // an atomic
		size := atomicSize(wr.Opcode, &wr.Atomic)
		n = uint32(size)
		if nl != 1 || r.length != size {
			return verbs.StatusLocLenErr, n, true
		}
	} else if r.length == 0 {
		// Nothing to copy, but the responder still answers (a liveness
		// probe): only it can tell that its QP receives or that it is
		// gone, so the request goes over the link.
		return 0, 0, false
	}
	mem := &q.exec.dmem
	o := &q.exec.rout
	if wr.Flags&verbs.FlagIndirect != 0 {
		// A PRISM operation: bracketed for the responder's MR.Quiesce.
		q.conn.direct.Enter()
		mem.respond(r, o)
		q.conn.direct.Exit()
		n = o.n
	} else {
		mem.respond(r, o)
	}
	if o.st == statusLink {
		return 0, 0, false
	}
	if o.failedCmp {
		q.send.failedCmp = true
	}
	return o.st, n, true
}

// quiesceQPs waits until no QP of the node is inside a critical section
// that started before the call (see resolveLocalDirect).
func (n *Node) quiesceQPs() {
	for _, q := range *n.qps.Load() {
		q.mu.Lock()
		busy := q.conn.direct != nil // the wait is the point; the test keeps the section non-empty
		q.mu.Unlock()
		_ = busy
	}
}
