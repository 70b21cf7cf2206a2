package prism

import "github.com/rdmakit/rdmakit/verbs"

// The client helpers fill work requests into the caller's slice wrs
// (which must have room) and return the part filled, ready for one
// PostSend; they allocate nothing. Only the last request of a list is
// signaled; errors complete anyway.

// IndirectRead fills one READ of up to dst.Length bytes through the
// pointer slot at slot (rkey's region): with bounded, the slot is a
// ⟨pointer, bound⟩ pair and the READ returns min(dst.Length, bound) bytes
// (WC.ByteLen). One round trip instead of two dependent READs.
func IndirectRead(wrs []verbs.SendWR, id uint64, dst verbs.SGE, rkey uint32, slot uint64, bounded bool) []verbs.SendWR {
	f := verbs.FlagSignaled | verbs.FlagIndirect
	if bounded {
		f |= verbs.FlagBounded
	}
	w := &wrs[0]
	sglW := w.SGL[:0] // keep the backing array: no allocation
	*w = verbs.SendWR{ID: id, Opcode: verbs.OpRead, Flags: f, RemoteAddr: slot, RKey: rkey}
	w.SGL = append(sglW, dst)
	return wrs[:1]
}

// AllocWriteInstall fills PRISM-KV's PUT chain: an ALLOCATE of item from
// free list queue of rkey's region, its address redirected to the scratch
// area at scratchOff (8 bytes), then a CONDITIONAL CAS with INDIRECT_ARG
// that installs that address in the 8-byte slot if the slot still holds
// old. res (8 bytes) receives the slot's previous value. Both complete
// with id (the ALLOCATE unsignaled): success with res == old means the new
// item is installed; otherwise another writer won and the allocated
// buffer, whose address the client does not know, is still in the
// scratch area — read it back (a READ of ScratchAddr(scratchOff)) to
// return it, or let the next chain reuse the area.
func AllocWriteInstall(wrs []verbs.SendWR, id uint64, item verbs.SGE, rkey uint32, queue uint32, slot, old uint64, res verbs.SGE, scratchOff int) []verbs.SendWR {
	a := &wrs[0]
	sglA := a.SGL[:0] // keep the backing array: no allocation
	*a = verbs.SendWR{ID: id, Opcode: verbs.OpAllocate, Flags: verbs.FlagRedirect, RKey: rkey, Queue: queue,
		RedirectAddr: verbs.ScratchAddr(scratchOff)}
	a.SGL = append(sglA, item)
	c := &wrs[1]
	sglC := c.SGL[:0] // keep the backing array: no allocation
	*c = verbs.SendWR{ID: id, Opcode: verbs.OpAtomicCmpAndSwp,
		Flags:      verbs.FlagSignaled | verbs.FlagConditional | verbs.FlagIndirectArg,
		RemoteAddr: slot, RKey: rkey, ArgAddr: verbs.ScratchAddr(scratchOff)}
	c.SGL = append(sglC, res)
	c.Atomic.Compare[0] = old
	return wrs[:2]
}

// CASIfGreater fills an enhanced CAS that replaces the size-byte value at
// addr (8, 16 or 32 bytes, aligned; word 0 most significant) with v when
// v is greater, comparing only the bits of cmpMask (all bits when cmpMask
// is zero) — PRISM-RS's "install if my tag is newer". res (size bytes)
// receives the previous value; v won if it compares greater than it.
func CASIfGreater(wrs []verbs.SendWR, id uint64, res verbs.SGE, rkey uint32, addr uint64, size uint8, v, cmpMask [4]uint64) []verbs.SendWR {
	if cmpMask == ([4]uint64{}) {
		for i := 0; i < int(size/8); i++ {
			cmpMask[i] = ^uint64(0)
		}
	}
	var swapMask [4]uint64
	for i := 0; i < int(size/8); i++ {
		swapMask[i] = ^uint64(0)
	}
	w := &wrs[0]
	sglW := w.SGL[:0] // keep the backing array: no allocation
	*w = verbs.SendWR{ID: id, Opcode: verbs.OpMaskedCmpAndSwp, Flags: verbs.FlagSignaled, RemoteAddr: addr, RKey: rkey,
		Atomic: verbs.AtomicArgs{Size: size, Op: verbs.CmpLess, Compare: v, CompareMask: cmpMask, Swap: v, SwapMask: swapMask}}
	w.SGL = append(sglW, res)
	return wrs[:1]
}
