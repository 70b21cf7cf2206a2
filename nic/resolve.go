package nic

import (
	"sync/atomic"

	"github.com/rdmakit/rdmakit/verbs"
)

// The resolver: how a responder turns (rkey, address, length) into bytes
// of its memory. The rules live here once; where the table of regions is
// kept is the caller's business — the node's key table for requests the
// NIC serves, a mapping of the responder's regions for the shm fast path
// (which calls Resolve with its table entry).

// Region is a registered region as a responder's table holds it: its
// bytes, the address of its first byte, its protection domain and the
// access it grants.
type Region struct {
	Mem    []byte
	Base   uint64
	PD     uint32
	Access verbs.Access
}

// Slice returns the n bytes at addr if they lie inside the region.
func (r *Region) Slice(addr, n uint64) ([]byte, bool) {
	if !r.holds(addr, n) {
		return nil, false
	}
	off := addr - r.Base
	return r.Mem[off : off+n : off+n], true
}

// holds reports whether the n bytes at addr lie inside the region.
func (r *Region) holds(addr, n uint64) bool {
	return addr >= r.Base && n <= uint64(len(r.Mem)) && addr-r.Base <= uint64(len(r.Mem))-n
}

// Resolve is the remote access rule of a responder: a request through a
// responder QP of protection domain pd that grants qpAccess may touch the
// n bytes at addr of region r (the one its rkey names; nil for an rkey
// that names none) when the region is in the same PD, both the region
// and the QP grant need (one access flag), and the bytes lie inside the
// region. Otherwise the request fails with REM_ACCESS_ERR.
func Resolve(r *Region, pd uint32, qpAccess verbs.Access, addr, n uint64, need verbs.Access) ([]byte, verbs.Status) {
	if r.grants(pd, qpAccess, need) && r.holds(addr, n) {
		off := addr - r.Base
		return r.Mem[off : off+n : off+n], verbs.StatusSuccess
	}
	return nil, verbs.StatusRemAccessErr
}

// grants reports whether region r (nil: none) serves a request needing
// need (one access flag) through a responder QP of protection domain pd granting qpAccess.
func (r *Region) grants(pd uint32, qpAccess, need verbs.Access) bool {
	return r != nil && r.PD == pd && r.Access&qpAccess&need != 0
}

// Receiving reports whether a responder QP in state s executes requests
// (RTR or RTS); in any other state a request fails with RETRY_EXC_ERR, as
// if unanswered.
func Receiving(s verbs.QPState) bool { return s == verbs.StateRTR || s == verbs.StateRTS }

// receiving reports whether the responder QP dq executes requests.
func receiving(dq *QP) bool { return Receiving(verbs.QPState(dq.state.Load())) }

// resolveRemote finds the n bytes at addr under rkey in the node memory of
// responder dq and pins their region (release it when done).
func resolveRemote(dq *QP, rkey uint32, addr, n uint64, need verbs.Access) (*MR, []byte, verbs.Status) {
	m := dq.node.keys.remote(rkey)
	if m == nil || !m.acquire() { // pinned before its bytes are looked at: deregistration unmaps them
		return nil, nil, verbs.StatusRemAccessErr
	}
	if !receiving(dq) {
		// Moved to ERROR since the caller looked: a fence (QP to ERROR,
		// then MR.Quiesce) that found the region unpinned must not see
		// this request land after it. The pin and this load, the fence's
		// state store and its load of the pins, are each ordered: one
		// side sees the other.
		m.release()
		return nil, nil, verbs.StatusRetryExcErr
	}
	b, st := Resolve(&m.reg, dq.pd.id, verbs.Access(dq.resp.access.Load()), addr, n, need)
	if st != verbs.StatusSuccess {
		m.release()
		return nil, nil, st
	}
	return m, b, verbs.StatusSuccess
}

// readSlot reads a pointer slot: 8 bytes with one atomic load (every
// atomic stores its 8-byte words whole), a 16-byte bounded pointer under
// the atomics lock of its address, so that a pair installed by a 16- or
// 32-byte CAS is never seen half old, half new.
func readSlot(l AtomicLocks, addr uint64, slot []byte) (ptr, bound uint64) {
	if len(slot) < 16 {
		return atomic.LoadUint64(word(slot)), 0
	}
	s := StripeOf(addr)
	l.Lock(s)
	ptr = atomic.LoadUint64(word(slot))
	bound = atomic.LoadUint64(word(slot[8:]))
	l.Unlock(s)
	return ptr, bound
}
