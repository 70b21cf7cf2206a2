package prismtx

import (
	"encoding/binary"

	"github.com/rdmakit/rdmakit/verbs"
)

// The protocol's chains, each built into a chain's request list. Every
// CAS's previous value lands at offOld.

const all = ^uint64(0)

// readValidate: one 16-byte CAS on ⟨PW, PR⟩, greater-than: if ⟨PW, PR⟩ <
// ⟨rc, ts⟩ then PR = ts. The previous ⟨PW, PR⟩ tells the outcomes apart:
// PW ≠ rc is a conflict (a writer prepared or committed since the read;
// PW ≥ C ≥ rc always, so PW < rc never happens), PW = rc with PR ≥ ts
// needed no update, PW = rc with PR < ts raised PR.
func readValidate(ch *chain, slot, rc, ts uint64) {
	ch.sgl[0] = ch.sge(offOld, 16)
	ch.wrs[0] = verbs.SendWR{Opcode: verbs.OpMaskedCmpAndSwp, RemoteAddr: slot, RKey: ch.c.lay.RKey, SGL: ch.sgl[0:1],
		Atomic: verbs.AtomicArgs{Size: 16, Op: verbs.CmpLess, Compare: [4]uint64{rc, ts}, CompareMask: [4]uint64{all, all},
			Swap: [4]uint64{0, ts}, SwapMask: [4]uint64{0, all}}}
	ch.wrs = ch.wrs[:1]
}

// writeValidate: a 32-byte CAS that raises PW to ts if PW = C = g (no
// writer is prepared, and the committed version is the one this write
// follows); the previous ⟨PW, PR, ptr, C⟩ says whether it did and lets
// the client check ts > PR. Chained on its success, in the same list:
// WRITE ts into the scratch area, ALLOCATE the pending version (the item
// already at offItem, n bytes) with its address redirected next to it,
// READ the address back, and a 16-byte CAS that sets the slot's
// ⟨pendPtr, pendTS⟩ to ⟨address, ts⟩ from the scratch area (INDIRECT_ARG)
// if pendTS < ts; its previous value lands at offPendOld. pendTS only grows:
// this CAS may run late (the chain stalled, a resolver aborted ts after
// its lease and another writer took the key), and then it must not
// replace that writer's pending version.
func writeValidate(ch *chain, slot, g, ts uint64, n int) {
	rkey := ch.c.lay.RKey
	binary.NativeEndian.PutUint64(ch.buf[offTS:], ts)
	binary.NativeEndian.PutUint64(ch.buf[offAlloc:], 0)
	binary.NativeEndian.PutUint64(ch.buf[offPendOld+8:], all)
	ch.sgl[0] = ch.sge(offOld, 32)
	ch.sgl[1] = ch.sge(offTS, 8)
	ch.sgl[2] = ch.sge(offItem, n)
	ch.sgl[3] = ch.sge(offAlloc, 8)
	ch.sgl[4] = ch.sge(offPendOld, 16)
	cond := verbs.FlagConditional
	w := ch.wrs[:5]
	var cmp, mask [4]uint64
	cmp[wPW], cmp[wC], mask[wPW], mask[wC] = g, g, all, all
	w[0] = verbs.SendWR{Opcode: verbs.OpMaskedCmpAndSwp, RemoteAddr: slot, RKey: rkey, SGL: ch.sgl[0:1],
		Atomic: verbs.AtomicArgs{Size: 32, Op: verbs.CmpEqual, Compare: cmp, CompareMask: mask,
			Swap: [4]uint64{ts}, SwapMask: [4]uint64{all}}}
	w[1] = verbs.SendWR{Opcode: verbs.OpWrite, Flags: cond | verbs.FlagInline, RemoteAddr: verbs.ScratchAddr(scratchTS), SGL: ch.sgl[1:2]}
	w[2] = verbs.SendWR{Opcode: verbs.OpAllocate, Flags: cond | verbs.FlagRedirect, RKey: rkey, Queue: class(n),
		RedirectAddr: verbs.ScratchAddr(scratchPtr), SGL: ch.sgl[2:3]}
	w[3] = verbs.SendWR{Opcode: verbs.OpRead, Flags: cond, RemoteAddr: verbs.ScratchAddr(scratchPtr), SGL: ch.sgl[3:4]}
	w[4] = verbs.SendWR{Opcode: verbs.OpMaskedCmpAndSwp, Flags: cond | verbs.FlagIndirectArg, RemoteAddr: slot + offPend, RKey: rkey,
		ArgAddr: verbs.ScratchAddr(scratchPtr), SGL: ch.sgl[4:5],
		Atomic: verbs.AtomicArgs{Size: 16, Op: verbs.CmpLess, Compare: [4]uint64{0, ts}, CompareMask: [4]uint64{0, all},
			SwapMask: [4]uint64{all, all}}}
	ch.wrs = w
}

// install: a 32-byte CAS that, if C < ts, swaps ⟨ptr, C⟩ for the slot's
// ⟨pendPtr, pendTS⟩ (INDIRECT_ARG from the slot's second half) — the
// PRISM-RS greater-than install, its operand the version ALLOCATEd at
// prepare. The owner and the clients that roll a committed transaction
// forward run the same CAS; one of them wins. The previous ⟨ptr, C⟩
// names the version replaced.
func install(ch *chain, slot, ts uint64) {
	installAt(ch, 0, offOld, slot, ts, 0)
	ch.wrs = ch.wrs[:1]
}

// installAt fills request i of the chain's list with install's CAS, its
// result at off, with flags (CONDITIONAL in the decision's list). The
// result's C word starts all ones: a CAS that did not run leaves it so.
func installAt(ch *chain, i, off int, slot, ts uint64, flags verbs.SendFlags) {
	binary.NativeEndian.PutUint64(ch.buf[off+8*wC:], all)
	ch.sgl[i] = ch.sge(off, 32)
	var cmp, mask [4]uint64
	cmp[wC], mask[wC] = ts, all
	ch.wrs[i] = verbs.SendWR{Opcode: verbs.OpMaskedCmpAndSwp, Flags: flags | verbs.FlagIndirectArg, RemoteAddr: slot, RKey: ch.c.lay.RKey,
		ArgAddr: slot + 32, SGL: ch.sgl[i : i+1],
		Atomic: verbs.AtomicArgs{Size: 32, Op: verbs.CmpLess, Compare: cmp, CompareMask: mask,
			SwapMask: [4]uint64{0, 0, all, all}}}
}

// raiseC: C = ts if C < ts, the pointer left as it is — the abort
// cleanup of a key whose PW the aborted transaction raised.
func raiseC(ch *chain, slot, ts uint64) {
	ch.sgl[0] = ch.sge(offOld, 8)
	ch.wrs[0] = verbs.SendWR{Opcode: verbs.OpMaskedCmpAndSwp, RemoteAddr: slot + 8*wC, RKey: ch.c.lay.RKey, SGL: ch.sgl[0:1],
		Atomic: verbs.AtomicArgs{Size: 8, Op: verbs.CmpLess, Compare: [4]uint64{ts}, CompareMask: [4]uint64{all},
			Swap: [4]uint64{ts}, SwapMask: [4]uint64{all}}}
	ch.wrs = ch.wrs[:1]
}

// decide: a 16-byte CAS on client id's decision record (on node id mod
// nodes): ⟨ts, verdict⟩ if
// the record's timestamp is smaller than ts. The previous record says
// who decided first: a timestamp below ts means this CAS did.
func decide(ch *chain, id uint16, ts, verdict uint64) {
	ch.sgl[0] = ch.sge(offOld, 16)
	ch.wrs[0] = verbs.SendWR{Opcode: verbs.OpMaskedCmpAndSwp, RemoteAddr: ch.c.lay.record(id), RKey: ch.c.lay.RKey, SGL: ch.sgl[0:1],
		Atomic: verbs.AtomicArgs{Size: 16, Op: verbs.CmpLess, Compare: [4]uint64{ts}, CompareMask: [4]uint64{all},
			Swap: [4]uint64{ts, verdict}, SwapMask: [4]uint64{all, all}}}
	ch.wrs = ch.wrs[:1]
}

// class is the free list (size class) of an n-byte item.
func class(n int) uint32 {
	k := uint32(0)
	for s := minBuf; s < n; s <<= 1 {
		k++
	}
	return k
}

// word is word i of the chain's result at offOld.
func (ch *chain) word(i int) uint64 { return binary.NativeEndian.Uint64(ch.buf[offOld+8*i:]) }
