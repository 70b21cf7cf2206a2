package nic

import (
	"encoding/binary"
	"sync/atomic"

	"github.com/rdmakit/rdmakit/verbs"
)

// The responder: one opcode switch that executes a request against the
// responder's memory, whichever requester brought it — a QP in this
// process (requester_local.go), a link from another process
// (responder_link.go) or this process's mapping of a responder elsewhere
// (requester_direct.go). Only where the bytes come from and go to differs:
// the requester's own scatter list, a Response frame, mapped memory. The
// rules (resolve.go) and the word-copy rule (sgl.go) are the same for all.

// request is one request as the responder executes it.
type request struct {
	op       verbs.Opcode
	flags    verbs.SendFlags
	rkey     uint32
	addr     uint64 // the remote address; the queue, for ALLOCATE
	length   uint64 // READ: bytes wanted; INDIRECT_ARG WRITE and REDIRECT READ: RemoteLen; else the payload's
	imm      uint32
	arg      uint64            // an INDIRECT_ARG operand's address
	redirect uint64            // where a REDIRECT READ or ALLOCATE stores its result
	atomic   *verbs.AtomicArgs // atomics only
	src      source            // SEND and WRITE_WITH_IMM: how receives report the requester
	payload  [][]byte          // SEND, WRITE, ALLOCATE: the bytes carried
	// sink is where a READ's bytes and an atomic's original value land.
	// A READ with no sink leaves its bytes in place: outcome.data, pinned
	// by outcome.held until the caller releases it.
	sink [][]byte
}

// outcome is what the responder did with a request.
type outcome struct {
	st        verbs.Status
	n         uint32 // bytes moved
	rnr       bool   // no receive posted, or an empty free list: nothing changed
	failedCmp bool   // an atomic compare that did not hold (chain.go)
	result    uint64 // ALLOCATE: the buffer's address
	data      []byte // READ without a sink: the bytes, in the responder's memory
	held      *MR    // the region data lies in, pinned
}

// statusLink is the status of a request the responder could not decide
// from this process (direct path only): it must go over the link, and
// nothing was done.
const statusLink verbs.Status = 0xff

// memory is the responder's memory as a request reaches it: the node
// memory of responder QP dq, or — on the direct path — the memory of
// responder QP qpn in another process, mapped here through d and checked
// there by the same rules (DirectLink.Remote) for requester QP src.
type memory struct {
	dq       *QP
	sc       *scratch // resolves receives for dq; its owner serialises its use
	d        DirectLink
	src, qpn uint32
	lk       AtomicLocks // the responder node's atomics locks
}

// area resolves the n bytes at addr under rkey, or in the responder QP's
// scratch area (node memory only). On the direct path, bytes that cannot
// be decided here give statusLink.
func (mem *memory) area(rkey uint32, addr, n uint64, need verbs.Access) (*MR, []byte, verbs.Status) {
	if mem.d != nil {
		b, st, ok := mem.d.Remote(mem.src, mem.qpn, rkey, addr, n, need)
		if !ok {
			st = statusLink
		}
		return nil, b, st
	}
	if addr >= verbs.ScratchBase {
		off := addr - verbs.ScratchBase
		if off > verbs.ScratchSize || n > verbs.ScratchSize-off {
			return nil, nil, verbs.StatusRemAccessErr
		}
		return nil, mem.dq.scratchBytes()[off : off+n : off+n], verbs.StatusSuccess // no MR: release is nil-safe
	}
	return resolveRemote(mem.dq, rkey, addr, n, need)
}

// region resolves the n bytes at addr in the region of rkey.
func (mem *memory) region(rkey uint32, addr, n uint64, need verbs.Access) (*MR, []byte, verbs.Status) {
	if mem.d != nil {
		b, st, ok := mem.d.Remote(mem.src, mem.qpn, rkey, addr, n, need)
		if !ok {
			st = statusLink
		}
		return nil, b, st
	}
	return resolveRemote(mem.dq, rkey, addr, n, need)
}

// pointee resolves the n bytes at ptr in the region a pointer slot was
// found in (m, or the region of rkey on the direct path).
func (mem *memory) pointee(m *MR, rkey uint32, ptr, n uint64, need verbs.Access) ([]byte, verbs.Status) {
	if mem.d != nil {
		_, b, st := mem.region(rkey, ptr, n, need)
		return b, st
	}
	b, ok := m.reg.Slice(ptr, n)
	if !ok {
		return nil, verbs.StatusRemAccessErr
	}
	return b, verbs.StatusSuccess
}

// target is area for a READ or WRITE that may be INDIRECT (and BOUNDED):
// it follows the pointer in the slot at addr, checks that slot and
// pointee lie in the region of rkey, and returns the n bytes (at most the
// bound, for BOUNDED) of the pointee.
func (mem *memory) target(rkey uint32, addr, n uint64, flags verbs.SendFlags, need verbs.Access) (*MR, []byte, verbs.Status) {
	if flags&verbs.FlagIndirect == 0 {
		return mem.area(rkey, addr, n, need)
	}
	return mem.indirect(rkey, addr, n, flags, need)
}

// indirect is target for an INDIRECT request.
func (mem *memory) indirect(rkey uint32, addr, n uint64, flags verbs.SendFlags, need verbs.Access) (*MR, []byte, verbs.Status) {
	slotLen, align := uint64(8), uint64(8)
	if flags&verbs.FlagBounded != 0 {
		slotLen, align = 16, 16
	}
	if addr%align != 0 {
		return nil, nil, verbs.StatusRemInvReqErr
	}
	m, slot, st := mem.region(rkey, addr, slotLen, need)
	if st != verbs.StatusSuccess {
		return nil, nil, st
	}
	ptr, bound := readSlot(mem.lk, addr, slot)
	if flags&verbs.FlagBounded != 0 && bound < n {
		n = bound
	}
	b, st := mem.pointee(m, rkey, ptr, n, need)
	if st != verbs.StatusSuccess {
		m.release()
		return nil, nil, st
	}
	return m, b, verbs.StatusSuccess
}

// respond executes request r at the responder. The caller has admitted
// it (the responder QP exists, is connected to the requester and
// receives); on the direct path only READ, WRITE and the atomics arrive,
// and DirectLink.Remote admits each access.
func (mem *memory) respond(r *request, o *outcome) {
	// data and held stay nil between requests (their user clears them).
	o.st, o.n, o.rnr, o.failedCmp = verbs.StatusSuccess, 0, false, false
	switch r.op {
	case verbs.OpRead:
		if r.flags&verbs.FlagRedirect != 0 {
			o.st, o.n = mem.redirectRead(r)
			return
		}
		if r.length == 0 {
			return // nothing to read: no key is checked
		}
		// The hot path: a plain READ resolves its area at once (on the
		// direct path, straight through the link: area without its frame).
		var m *MR
		var src []byte
		switch {
		case r.flags&verbs.FlagIndirect != 0:
			m, src, o.st = mem.indirect(r.rkey, r.addr, r.length, r.flags, verbs.AccessRemoteRead)
		case mem.d != nil:
			var ok bool
			if src, o.st, ok = mem.d.Remote(mem.src, mem.qpn, r.rkey, r.addr, r.length, verbs.AccessRemoteRead); !ok {
				o.st = statusLink
			}
		default:
			m, src, o.st = mem.area(r.rkey, r.addr, r.length, verbs.AccessRemoteRead)
		}
		if o.st != verbs.StatusSuccess {
			return
		}
		o.n = uint32(len(src))
		if r.sink == nil {
			o.data, o.held = src, m // the caller releases it
			return
		}
		readMem(r.sink, src)
		m.release()
	case verbs.OpWrite:
		if r.flags&verbs.FlagIndirectArg != 0 {
			o.st, o.n = mem.argWrite(r), uint32(r.length)
			return
		}
		o.st, o.n = mem.write(r), uint32(r.length)
	case verbs.OpWriteWithImm:
		o.st, o.rnr = mem.writeWithImm(r)
		o.n = uint32(r.length)
	case verbs.OpSend, verbs.OpSendWithImm:
		o.st, o.rnr = mem.send(r)
		o.n = uint32(r.length)
	case verbs.OpAllocate:
		o.st, o.result = respondAllocate(mem.dq, r.rkey, uint32(r.addr), r.flags, r.redirect, r.payload, r.length)
		o.rnr = o.st == verbs.StatusRemOpErr // an empty free list: NAKed like a SEND without a receive
		if !o.rnr {
			o.n = uint32(r.length)
		}
	case verbs.OpAtomicCmpAndSwp, verbs.OpAtomicFetchAndAdd, verbs.OpMaskedCmpAndSwp, verbs.OpMaskedFetchAndAdd:
		var orig [4]uint64
		if o.st = mem.atomic(r, &orig); o.st != verbs.StatusSuccess {
			return
		}
		o.failedCmp = !cmpHeld(r.op, r.atomic, &orig)
		putWords(r.sink[0], &orig)
		o.n = uint32(len(r.sink[0]))
	default:
		o.st = verbs.StatusRemInvReqErr
	}
}

// write executes a WRITE's memory part: the payload into the target.
func (mem *memory) write(r *request) verbs.Status {
	if r.length == 0 {
		return verbs.StatusSuccess
	}
	var m *MR
	var dst []byte
	var st verbs.Status
	if r.flags&verbs.FlagIndirect == 0 {
		m, dst, st = mem.area(r.rkey, r.addr, r.length, verbs.AccessRemoteWrite)
	} else {
		m, dst, st = mem.indirect(r.rkey, r.addr, r.length, r.flags, verbs.AccessRemoteWrite)
	}
	if st != verbs.StatusSuccess {
		return st
	}
	writeMem(dst, r.payload)
	m.release()
	return verbs.StatusSuccess
}

// writeWithImm executes a WRITE_WITH_IMM: the write, and the immediate
// in the oldest receive, which it consumes; with no receive posted,
// nothing happens (rnr).
func (mem *memory) writeWithImm(r *request) (verbs.Status, bool) {
	dq := mem.dq
	rq := dq.recvQueue()
	rq.lock()
	defer rq.unlock()
	id, _, ok := rq.peek()
	if !ok {
		return 0, true
	}
	if st := mem.write(r); st != verbs.StatusSuccess {
		return st, false
	}
	rq.pop()
	completeWriteImm(dq, id, r)
	return verbs.StatusSuccess, false
}

// send delivers a SEND or SEND_WITH_IMM into the oldest receive.
func (mem *memory) send(r *request) (verbs.Status, bool) {
	switch deliver(mem.dq, mem.sc, r, false) {
	case noReceive:
		return 0, true
	case recvLenErr:
		return verbs.StatusRemInvReqErr, false
	case recvProtErr:
		return verbs.StatusRemOpErr, false
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

// atomic executes an atomic and stores the original value in orig.
func (mem *memory) atomic(r *request, orig *[4]uint64) verbs.Status {
	a, addr := r.atomic, r.addr
	size := atomicSize(r.op, a)
	if size != 8 && size != 16 && size != 32 {
		return verbs.StatusRemInvReqErr
	}
	if r.flags&verbs.FlagIndirect != 0 {
		// The target is the pointee of the slot at addr, in the same region.
		if addr%8 != 0 {
			return verbs.StatusRemInvReqErr
		}
		m, slot, st := mem.region(r.rkey, addr, 8, verbs.AccessRemoteAtomic)
		if st != verbs.StatusSuccess {
			return st
		}
		ptr, _ := readSlot(mem.lk, addr, slot)
		_, st = mem.pointee(m, r.rkey, ptr, size, verbs.AccessRemoteAtomic)
		m.release()
		if st != verbs.StatusSuccess {
			return st
		}
		addr = ptr
	}
	if addr&(size-1) != 0 || (r.flags&verbs.FlagIndirectArg != 0 && r.arg%8 != 0) { // size is a power of two
		return verbs.StatusRemInvReqErr
	}
	if r.flags&verbs.FlagIndirectArg != 0 {
		ac := *a
		if st := mem.loadArg(r.rkey, r.arg, size, &ac); st != verbs.StatusSuccess {
			return st
		}
		a = &ac
	}
	var m *MR
	var b []byte
	var st verbs.Status
	if mem.d != nil { // region without its frame, as READ does
		var ok bool
		if b, st, ok = mem.d.Remote(mem.src, mem.qpn, r.rkey, addr, size, verbs.AccessRemoteAtomic); !ok {
			st = statusLink
		}
	} else {
		m, b, st = resolveRemote(mem.dq, r.rkey, addr, size, verbs.AccessRemoteAtomic)
	}
	if st != verbs.StatusSuccess {
		return st
	}
	execAtomic(mem.lk, r.op, a, r.rkey, addr, b, orig)
	m.release()
	return verbs.StatusSuccess
}

// redirectRead runs a REDIRECT READ: length bytes at addr (followed if
// INDIRECT) copied to redirect. It returns the bytes moved.
func (mem *memory) redirectRead(r *request) (verbs.Status, uint32) {
	m, src, st := mem.target(r.rkey, r.addr, r.length, r.flags, verbs.AccessRemoteRead)
	if st != verbs.StatusSuccess {
		return st, 0
	}
	m2, dst, st := mem.area(r.rkey, r.redirect, uint64(len(src)), verbs.AccessRemoteWrite)
	if st == verbs.StatusSuccess {
		copy(dst, src)
	}
	m.release()
	m2.release()
	return st, uint32(len(src))
}

// argWrite runs an INDIRECT_ARG WRITE: length bytes at arg copied to
// addr (followed if INDIRECT).
func (mem *memory) argWrite(r *request) verbs.Status {
	m, src, st := mem.area(r.rkey, r.arg, r.length, verbs.AccessRemoteRead)
	if st != verbs.StatusSuccess {
		return st
	}
	m2, dst, st := mem.target(r.rkey, r.addr, r.length, r.flags, verbs.AccessRemoteWrite)
	if st == verbs.StatusSuccess {
		copy(dst, src)
	}
	m.release()
	m2.release()
	return st
}

// loadArg loads an INDIRECT_ARG atomic's swap (or add) operand, size
// bytes at arg, into a.
func (mem *memory) loadArg(rkey uint32, arg, size uint64, a *verbs.AtomicArgs) verbs.Status {
	m, b, st := mem.area(rkey, arg, size, verbs.AccessRemoteRead)
	if st != verbs.StatusSuccess {
		return st
	}
	for i := uint64(0); i < size/8; i++ {
		a.Swap[i] = atomic.LoadUint64(word(b[8*i:]))
	}
	m.release()
	return verbs.StatusSuccess
}

// plainAccess is the access a plain READ, WRITE, CAS or FETCH_ADD needs
// of the responder's memory (the direct fast path's requests,
// requester_fast.go), or 0 for any other opcode.
func plainAccess(op verbs.Opcode) verbs.Access {
	switch op {
	case verbs.OpRead:
		return verbs.AccessRemoteRead
	case verbs.OpWrite:
		return verbs.AccessRemoteWrite
	case verbs.OpAtomicCmpAndSwp, verbs.OpAtomicFetchAndAdd:
		return verbs.AccessRemoteAtomic
	}
	return 0
}

// respondPlain executes a plain READ, WRITE, CAS or FETCH_ADD whose
// target, the bytes mem of the responder's memory at addr, and whose one
// local buffer buf the caller resolved (the direct fast path): the same
// word rule and atomics unit as respond. It reports whether a CAS's
// compare failed.
func respondPlain(lk AtomicLocks, op verbs.Opcode, a *verbs.AtomicArgs, rkey uint32, addr uint64, mem, buf []byte) (failedCmp bool) {
	switch op {
	case verbs.OpRead:
		if len(mem) == 8 {
			binary.NativeEndian.PutUint64(buf, load8(mem))
		} else {
			copy(buf, mem)
		}
	case verbs.OpWrite:
		if len(mem) == 8 {
			store8(mem, binary.NativeEndian.Uint64(buf))
		} else {
			copy(mem, buf)
		}
	default:
		var orig [4]uint64
		failedCmp = !execAtomic(lk, op, a, rkey, addr, mem, &orig)
		binary.NativeEndian.PutUint64(buf, orig[0])
	}
	return failedCmp
}
