package nic

import (
	"sync/atomic"

	"github.com/rdmakit/rdmakit/verbs"
)

// prismFlags are the PRISM flags a QP of type t accepts.
func prismFlags(t verbs.QPType) verbs.SendFlags {
	if t == verbs.RC {
		return verbs.FlagIndirect | verbs.FlagBounded | verbs.FlagConditional | verbs.FlagIndirectArg | verbs.FlagRedirect
	}
	return 0
}

// resolveTarget is resolveRemote for a READ or WRITE that may be INDIRECT
// (and BOUNDED): it follows the pointer in the slot at addr, checks that
// slot and pointee lie in the region of rkey, and returns the n bytes (at
// most the bound, for BOUNDED) of the pointee.
func resolveTarget(dq *QP, rkey uint32, addr, n uint64, flags verbs.SendFlags, need verbs.Access) (*MR, []byte, verbs.Status) {
	if flags&verbs.FlagIndirect == 0 {
		return resolveArea(dq, rkey, addr, n, need)
	}
	slotLen, align := uint64(8), uint64(8)
	if flags&verbs.FlagBounded != 0 {
		slotLen, align = 16, 16
	}
	if addr%align != 0 {
		return nil, nil, verbs.StatusRemInvReqErr
	}
	m, slot, st := resolveRemote(dq, rkey, addr, slotLen, need)
	if st != verbs.StatusSuccess {
		return nil, nil, st
	}
	ptr, bound := readSlot(dq.node.locks, addr, slot)
	if flags&verbs.FlagBounded != 0 && bound < n {
		n = bound
	}
	b, ok := m.slice(ptr, n)
	if !ok {
		m.release()
		return nil, nil, verbs.StatusRemAccessErr
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
	if len(slot) >= 16 {
		bound = atomic.LoadUint64(word(slot[8:]))
	}
	l.Unlock(s)
	return ptr, bound
}
