package verbstest

import (
	"time"

	"testing"

	"github.com/rdmakit/rdmakit/verbs"
)

// prismCases cover PRISM's indirection: INDIRECT and BOUNDED READs and
// WRITEs, and what they reject.
func prismCases() []Case {
	// layout of the responder's region in these cases
	const (
		slot    = 0    // 8-byte pointer slot
		bslot   = 16   // 16-byte bounded pointer slot
		object  = 256  // the pointee
		object2 = 1024 // another pointee
	)
	setup := func(t *testing.T, p Provider) *pair {
		pr := newPair(t, p, pairOpts{})
		b := pr.mb.Bytes()
		fill(b[object:object+64], 0x10)
		fill(b[object2:object2+64], 0x70)
		put64(b, slot, pr.mb.Addr()+object)
		put64(b, bslot, pr.mb.Addr()+object)
		put64(b, bslot+8, 5)
		return pr
	}
	indirect := func(id uint64, op verbs.Opcode, pr *pair, roff int, flags verbs.SendFlags, sgl ...verbs.SGE) verbs.SendWR {
		w := rdma(id, op, pr.mb, roff, sgl...)
		w.Flags |= flags
		return w
	}
	return []Case{
		parallel("IndirectRead", func(t *testing.T, p Provider) {
			pr := setup(t, p)
			wc := expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, indirect(1, verbs.OpRead, pr, slot, verbs.FlagIndirect, sg(pr.ma, 0, 64)))
			if wc.ByteLen != 64 {
				t.Errorf("ByteLen %d, want 64", wc.ByteLen)
			}
			equal(t, "indirect READ", pr.ma.Bytes()[:64], pr.mb.Bytes()[object:object+64])
			// The slot now points elsewhere: the next READ follows it.
			put64(pr.mb.Bytes(), slot, pr.mb.Addr()+object2)
			expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, indirect(2, verbs.OpRead, pr, slot, verbs.FlagIndirect, sg(pr.ma, 0, 8)))
			equal(t, "READ after the pointer moved", pr.ma.Bytes()[:8], pr.mb.Bytes()[object2:object2+8])
		}),
		parallel("BoundedRead", func(t *testing.T, p Provider) {
			pr := setup(t, p)
			for i := range pr.ma.Bytes()[:64] {
				pr.ma.Bytes()[i] = 0xee
			}
			wc := expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, indirect(1, verbs.OpRead, pr, bslot, verbs.FlagIndirect|verbs.FlagBounded, sg(pr.ma, 0, 64)))
			if wc.ByteLen != 5 {
				t.Errorf("ByteLen %d, want the bound 5", wc.ByteLen)
			}
			equal(t, "bounded READ", pr.ma.Bytes()[:5], pr.mb.Bytes()[object:object+5])
			for i, c := range pr.ma.Bytes()[5:64] {
				if c != 0xee {
					t.Fatalf("byte %d beyond the bound was overwritten", 5+i)
				}
			}
			// A request shorter than the bound reads what it asked for.
			wc = expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, indirect(2, verbs.OpRead, pr, bslot, verbs.FlagIndirect|verbs.FlagBounded, sg(pr.ma, 0, 3)))
			if wc.ByteLen != 3 {
				t.Errorf("ByteLen %d, want 3", wc.ByteLen)
			}
		}),
		parallel("IndirectWrite", func(t *testing.T, p Provider) {
			pr := setup(t, p)
			fill(pr.ma.Bytes()[:32], 0x99)
			expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, indirect(1, verbs.OpWrite, pr, slot, verbs.FlagIndirect, sg(pr.ma, 0, 32)))
			equal(t, "indirect WRITE", pr.mb.Bytes()[object:object+32], pr.ma.Bytes()[:32])
			if u64(pr.mb.Bytes(), slot) != pr.mb.Addr()+object {
				t.Error("the WRITE changed the pointer slot")
			}
		}),
		parallel("BoundedWrite", func(t *testing.T, p Provider) {
			pr := setup(t, p)
			before := append([]byte(nil), pr.mb.Bytes()[object:object+64]...)
			fill(pr.ma.Bytes()[:64], 0x42)
			expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, indirect(1, verbs.OpWrite, pr, bslot, verbs.FlagIndirect|verbs.FlagBounded, sg(pr.ma, 0, 64)))
			equal(t, "bounded WRITE", pr.mb.Bytes()[object:object+5], pr.ma.Bytes()[:5])
			equal(t, "bytes beyond the bound", pr.mb.Bytes()[object+5:object+64], before[5:])
		}),
		parallel("IndirectPointerOutsideRegion", func(t *testing.T, p Provider) {
			// A pointee in another region, even of the same PD, is refused;
			// so is one that runs past the end of the slot's region.
			for i, n := range []int{8, 16, 8, 8} {
				pq := newPair(t, p, pairOpts{})
				switch i {
				case 0:
					put64(pq.mb.Bytes(), slot, pq.b.mr(t, 4096, verbs.AccessAll).Addr())
				case 1:
					put64(pq.mb.Bytes(), slot, pq.mb.Addr()+4096-8)
				case 2:
					put64(pq.mb.Bytes(), slot, 0)
				case 3:
					put64(pq.mb.Bytes(), slot, ^uint64(0)-4)
				}
				w := rdma(1, verbs.OpRead, pq.mb, slot, sg(pq.ma, 0, n))
				w.Flags |= verbs.FlagIndirect
				expect(t, pq.qa, pq.a.cq, verbs.StatusRemAccessErr, w)
				waitState(t, pq.qa, verbs.StateError)
			}
		}),
		parallel("IndirectSlotChecks", func(t *testing.T, p Provider) {
			// A misaligned slot is an invalid request.
			pr := setup(t, p)
			expect(t, pr.qa, pr.a.cq, verbs.StatusRemInvReqErr, indirect(1, verbs.OpRead, pr, slot+4, verbs.FlagIndirect, sg(pr.ma, 0, 8)))
			// A bounded slot must be 16-byte aligned.
			pr = setup(t, p)
			expect(t, pr.qa, pr.a.cq, verbs.StatusRemInvReqErr, indirect(1, verbs.OpRead, pr, 8, verbs.FlagIndirect|verbs.FlagBounded, sg(pr.ma, 0, 8)))
			// A slot outside the region is an access error.
			pr = setup(t, p)
			expect(t, pr.qa, pr.a.cq, verbs.StatusRemAccessErr, indirect(1, verbs.OpRead, pr, 4096, verbs.FlagIndirect, sg(pr.ma, 0, 8)))
			// The region must grant the operation's access to the slot's rkey.
			pr = setup(t, p)
			ro := pr.b.mr(t, 4096, verbs.AccessRemoteRead)
			put64(ro.Bytes(), 0, ro.Addr()+256)
			w := rdma(1, verbs.OpWrite, ro, 0, sg(pr.ma, 0, 8))
			w.Flags |= verbs.FlagIndirect
			expect(t, pr.qa, pr.a.cq, verbs.StatusRemAccessErr, w)
		}),
		parallel("IndirectAtomics", func(t *testing.T, p Provider) {
			pr := setup(t, p)
			put64(pr.mb.Bytes(), object, 40)
			f := faa(1, pr.mb, slot, sg(pr.ma, 0, 8), 2)
			f.Flags |= verbs.FlagIndirect
			c := cas(2, pr.mb, slot, sg(pr.ma, 8, 8), 42, 100)
			c.Flags |= verbs.FlagIndirect
			post(t, pr.qa, f, c)
			wcs := waitN(t, pr.a.cq, 2)
			check(t, wcs[0], 1, verbs.StatusSuccess)
			check(t, wcs[1], 2, verbs.StatusSuccess)
			if u64(pr.ma.Bytes(), 0) != 40 || u64(pr.ma.Bytes(), 8) != 42 || u64(pr.mb.Bytes(), object) != 100 {
				t.Errorf("indirect FAA returned %d, CAS %d, object now %d", u64(pr.ma.Bytes(), 0), u64(pr.ma.Bytes(), 8), u64(pr.mb.Bytes(), object))
			}
			if u64(pr.mb.Bytes(), slot) != pr.mb.Addr()+object {
				t.Error("the atomics changed the pointer slot")
			}
			// A misaligned pointee is an invalid request.
			put64(pr.mb.Bytes(), slot, pr.mb.Addr()+object+4)
			f.ID = 3
			expect(t, pr.qa, pr.a.cq, verbs.StatusRemInvReqErr, f)
			// A pointee outside the region is an access error.
			pr = setup(t, p)
			put64(pr.mb.Bytes(), slot, pr.mb.Addr()+4096)
			f = faa(4, pr.mb, slot, sg(pr.ma, 0, 8), 1)
			f.Flags |= verbs.FlagIndirect
			expect(t, pr.qa, pr.a.cq, verbs.StatusRemAccessErr, f)
			// Bounded atomics do not exist.
			pr = setup(t, p)
			f.Flags |= verbs.FlagBounded
			wantPostErr(t, pr.qa.PostSend([]verbs.SendWR{f}), 0, verbs.ErrNotSupported)
		}),
		parallel("IndirectPostChecks", func(t *testing.T, p Provider) {
			pr := setup(t, p)
			w := rdma(1, verbs.OpRead, pr.mb, bslot, sg(pr.ma, 0, 8))
			w.Flags |= verbs.FlagBounded
			wantPostErr(t, pr.qa.PostSend([]verbs.SendWR{w}), 0, verbs.ErrInvalidArg)
			s := send(2, sg(pr.ma, 0, 8))
			s.Flags |= verbs.FlagIndirect
			wantPostErr(t, pr.qa.PostSend([]verbs.SendWR{s}), 0, verbs.ErrNotSupported)
			if pr.qa.State() != verbs.StateRTS {
				t.Errorf("QP is %v after rejected posts", pr.qa.State())
			}
		}),
	}
}

// chainCases cover PRISM's CONDITIONAL chaining.
func chainCases() []Case {
	cond := func(w verbs.SendWR) verbs.SendWR {
		w.Flags |= verbs.FlagConditional
		return w
	}
	return []Case{
		parallel("ConditionalChain", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			put64(pr.mb.Bytes(), 0, 7)
			put64(pr.ma.Bytes(), 64, 0xabc)
			post(t, pr.qa,
				cond(rdma(1, verbs.OpWrite, pr.mb, 8, sg(pr.ma, 64, 8))), // the first request of a connection runs
				cond(cas(2, pr.mb, 0, sg(pr.ma, 0, 8), 7, 8)),
				cond(rdma(3, verbs.OpRead, pr.mb, 0, sg(pr.ma, 16, 8))))
			wcs := waitN(t, pr.a.cq, 3)
			for i, wc := range wcs {
				check(t, wc, uint64(i+1), verbs.StatusSuccess)
			}
			if u64(pr.mb.Bytes(), 8) != 0xabc || u64(pr.ma.Bytes(), 16) != 8 {
				t.Errorf("chain effects: slot %#x, read %d", u64(pr.mb.Bytes(), 8), u64(pr.ma.Bytes(), 16))
			}
		}),
		parallel("ConditionalSkipsAfterFailedCompare", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			put64(pr.mb.Bytes(), 0, 7)
			put64(pr.ma.Bytes(), 64, 0xabc)
			post(t, pr.qa,
				cas(1, pr.mb, 0, sg(pr.ma, 0, 8), 99, 8), // compare fails: not an error
				cond(rdma(2, verbs.OpWrite, pr.mb, 8, sg(pr.ma, 64, 8))),
				cond(rdma(3, verbs.OpWrite, pr.mb, 16, sg(pr.ma, 64, 8))), // after a skipped one: skipped
				rdma(4, verbs.OpRead, pr.mb, 0, sg(pr.ma, 24, 8)),         // unconditional: runs
				cond(rdma(5, verbs.OpWrite, pr.mb, 32, sg(pr.ma, 64, 8))))
			wcs := waitN(t, pr.a.cq, 5)
			want := []verbs.Status{verbs.StatusSuccess, verbs.StatusSkipped, verbs.StatusSkipped, verbs.StatusSuccess, verbs.StatusSuccess}
			for i, wc := range wcs {
				check(t, wc, uint64(i+1), want[i])
			}
			if u64(pr.ma.Bytes(), 0) != 7 {
				t.Errorf("CAS returned %d, want the original 7", u64(pr.ma.Bytes(), 0))
			}
			if u64(pr.mb.Bytes(), 8) != 0 || u64(pr.mb.Bytes(), 16) != 0 || u64(pr.mb.Bytes(), 32) != 0xabc {
				t.Errorf("skipped WRITEs wrote: %#x %#x, the last one %#x", u64(pr.mb.Bytes(), 8), u64(pr.mb.Bytes(), 16), u64(pr.mb.Bytes(), 32))
			}
			if s := pr.qa.State(); s != verbs.StateRTS {
				t.Errorf("QP is %v after skipped requests, want RTS", s)
			}
		}),
		parallel("ConditionalAfterMaskedCompare", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			put64(pr.mb.Bytes(), 0, 10)
			put64(pr.ma.Bytes(), 64, 0xabc)
			all := [4]uint64{^uint64(0)}
			greater := func(id uint64, v uint64) verbs.SendWR { // swap in v if v > current
				return masked(id, verbs.OpMaskedCmpAndSwp, pr.mb, 0, sg(pr.ma, 0, 8), verbs.AtomicArgs{Size: 8, Op: verbs.CmpLess,
					Compare: [4]uint64{v}, CompareMask: all, Swap: [4]uint64{v}, SwapMask: all})
			}
			post(t, pr.qa, greater(1, 5), cond(rdma(2, verbs.OpWrite, pr.mb, 8, sg(pr.ma, 64, 8))),
				greater(3, 20), cond(rdma(4, verbs.OpWrite, pr.mb, 16, sg(pr.ma, 64, 8))))
			wcs := waitN(t, pr.a.cq, 4)
			want := []verbs.Status{verbs.StatusSuccess, verbs.StatusSkipped, verbs.StatusSuccess, verbs.StatusSuccess}
			for i, wc := range wcs {
				check(t, wc, uint64(i+1), want[i])
			}
			if u64(pr.mb.Bytes(), 0) != 20 || u64(pr.mb.Bytes(), 8) != 0 || u64(pr.mb.Bytes(), 16) != 0xabc {
				t.Errorf("memory %d %#x %#x, want 20 0 0xabc", u64(pr.mb.Bytes(), 0), u64(pr.mb.Bytes(), 8), u64(pr.mb.Bytes(), 16))
			}
		}),
		parallel("ConditionalBehindInFlight", func(t *testing.T, p Provider) {
			// A SEND first, so the rest queues behind it: where requests
			// travel to another process, the responder decides.
			pr := newPair(t, p, pairOpts{})
			postRecv(t, pr.qb, 100, sg(pr.mb, 512, 64))
			put64(pr.mb.Bytes(), 0, 7)
			put64(pr.ma.Bytes(), 64, 0xabc)
			post(t, pr.qa,
				send(1, sg(pr.ma, 64, 8)),
				cas(2, pr.mb, 0, sg(pr.ma, 0, 8), 99, 8),
				cond(rdma(3, verbs.OpWrite, pr.mb, 8, sg(pr.ma, 64, 8))),
				cond(rdma(4, verbs.OpWrite, pr.mb, 16, sg(pr.ma, 64, 8))),
				cas(5, pr.mb, 0, sg(pr.ma, 32, 8), 7, 9),
				cond(rdma(6, verbs.OpWrite, pr.mb, 24, sg(pr.ma, 64, 8))))
			wcs := waitN(t, pr.a.cq, 6)
			want := []verbs.Status{verbs.StatusSuccess, verbs.StatusSuccess, verbs.StatusSkipped, verbs.StatusSkipped, verbs.StatusSuccess, verbs.StatusSuccess}
			for i, wc := range wcs {
				check(t, wc, uint64(i+1), want[i])
			}
			if u64(pr.mb.Bytes(), 0) != 9 || u64(pr.mb.Bytes(), 8) != 0 || u64(pr.mb.Bytes(), 16) != 0 || u64(pr.mb.Bytes(), 24) != 0xabc {
				t.Errorf("memory %d %#x %#x %#x", u64(pr.mb.Bytes(), 0), u64(pr.mb.Bytes(), 8), u64(pr.mb.Bytes(), 16), u64(pr.mb.Bytes(), 24))
			}
			wait1(t, pr.b.cq)
		}),
		parallel("ConditionalUnsignaledSkip", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			put64(pr.mb.Bytes(), 0, 7)
			w := cond(rdma(2, verbs.OpWrite, pr.mb, 8, sg(pr.ma, 64, 8)))
			w.Flags &^= verbs.FlagSignaled
			post(t, pr.qa, cas(1, pr.mb, 0, sg(pr.ma, 0, 8), 99, 8), w, rdma(3, verbs.OpRead, pr.mb, 0, sg(pr.ma, 16, 8)))
			wcs := waitN(t, pr.a.cq, 2)
			check(t, wcs[0], 1, verbs.StatusSuccess)
			check(t, wcs[1], 3, verbs.StatusSuccess)
			quiet(t, pr.a.cq)
		}),
	}
}

// operandCases cover the scratch area, REDIRECT and INDIRECT_ARG.
func operandCases() []Case {
	return []Case{
		parallel("ScratchArea", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			put64(pr.ma.Bytes(), 0, 0x5c7a7c4)
			w := verbs.SendWR{ID: 1, Opcode: verbs.OpWrite, Flags: verbs.FlagSignaled, SGL: []verbs.SGE{sg(pr.ma, 0, 8)}, RemoteAddr: verbs.ScratchAddr(8)}
			expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, w)
			r := verbs.SendWR{ID: 2, Opcode: verbs.OpRead, Flags: verbs.FlagSignaled, SGL: []verbs.SGE{sg(pr.ma, 64, 16)}, RemoteAddr: verbs.ScratchAddr(0)}
			expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, r)
			if u64(pr.ma.Bytes(), 64) != 0 || u64(pr.ma.Bytes(), 72) != 0x5c7a7c4 {
				t.Errorf("scratch reads back %#x %#x", u64(pr.ma.Bytes(), 64), u64(pr.ma.Bytes(), 72))
			}
			r = verbs.SendWR{ID: 3, Opcode: verbs.OpRead, Flags: verbs.FlagSignaled, SGL: []verbs.SGE{sg(pr.ma, 64, 16)}, RemoteAddr: verbs.ScratchAddr(verbs.ScratchSize - 8)}
			expect(t, pr.qa, pr.a.cq, verbs.StatusRemAccessErr, r)
		}),
		parallel("RedirectRead", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			fill(pr.mb.Bytes()[256:256+32], 0x31)
			w := rdma(1, verbs.OpRead, pr.mb, 256)
			w.Flags |= verbs.FlagRedirect
			w.RemoteLen, w.RedirectAddr = 32, verbs.ScratchAddr(16)
			if wc := expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, w); wc.ByteLen != 32 {
				t.Errorf("ByteLen %d, want 32", wc.ByteLen)
			}
			r := verbs.SendWR{ID: 2, Opcode: verbs.OpRead, Flags: verbs.FlagSignaled, SGL: []verbs.SGE{sg(pr.ma, 0, 32)}, RemoteAddr: verbs.ScratchAddr(16)}
			expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, r)
			equal(t, "redirected bytes", pr.ma.Bytes()[:32], pr.mb.Bytes()[256:288])
			// Into the region itself.
			w = rdma(3, verbs.OpRead, pr.mb, 256)
			w.Flags |= verbs.FlagRedirect
			w.RemoteLen, w.RedirectAddr = 32, pr.mb.Addr()+1024
			expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, w)
			equal(t, "redirected into the region", pr.mb.Bytes()[1024:1056], pr.mb.Bytes()[256:288])
			// Beyond the scratch area: an access error.
			w = rdma(4, verbs.OpRead, pr.mb, 256)
			w.Flags |= verbs.FlagRedirect
			w.RemoteLen, w.RedirectAddr = 32, verbs.ScratchAddr(48)
			expect(t, pr.qa, pr.a.cq, verbs.StatusRemAccessErr, w)
		}),
		parallel("IndirectArgWrite", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			fill(pr.mb.Bytes()[512:512+24], 0x51)
			w := rdma(1, verbs.OpWrite, pr.mb, 2048)
			w.Flags |= verbs.FlagIndirectArg
			w.RemoteLen, w.ArgAddr = 24, pr.mb.Addr()+512
			expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, w)
			equal(t, "INDIRECT_ARG WRITE", pr.mb.Bytes()[2048:2048+24], pr.mb.Bytes()[512:512+24])
			w.ID, w.ArgAddr = 2, pr.mb.Addr()+4096-8 // operand past the region
			expect(t, pr.qa, pr.a.cq, verbs.StatusRemAccessErr, w)
		}),
		parallel("IndirectArgCASChain", func(t *testing.T, p Provider) {
			// PRISM-KV's install: a slot holds the old pointer; a redirected
			// READ puts the new pointer in the scratch area, and a
			// conditional CAS swaps it in from there — one post list.
			pr := newPair(t, p, pairOpts{})
			const slot, fresh = 0, 64
			oldPtr, newPtr := pr.mb.Addr()+1024, pr.mb.Addr()+2048
			put64(pr.mb.Bytes(), slot, oldPtr)
			put64(pr.mb.Bytes(), fresh, newPtr)
			rd := rdma(1, verbs.OpRead, pr.mb, fresh)
			rd.Flags |= verbs.FlagRedirect
			rd.RemoteLen, rd.RedirectAddr = 8, verbs.ScratchAddr(0)
			c := cas(2, pr.mb, slot, sg(pr.ma, 0, 8), oldPtr, 0)
			c.Flags |= verbs.FlagIndirectArg | verbs.FlagConditional
			c.ArgAddr = verbs.ScratchAddr(0)
			post(t, pr.qa, rd, c)
			wcs := waitN(t, pr.a.cq, 2)
			check(t, wcs[0], 1, verbs.StatusSuccess)
			check(t, wcs[1], 2, verbs.StatusSuccess)
			if got := u64(pr.mb.Bytes(), slot); got != newPtr {
				t.Fatalf("slot %#x, want the new pointer %#x", got, newPtr)
			}
			if u64(pr.ma.Bytes(), 0) != oldPtr {
				t.Errorf("CAS returned %#x, want the old pointer", u64(pr.ma.Bytes(), 0))
			}
			// Again: the slot no longer holds oldPtr, the CAS fails and a
			// conditional WRITE after it is skipped.
			put64(pr.ma.Bytes(), 64, 0xdead)
			wr := rdma(4, verbs.OpWrite, pr.mb, 512, sg(pr.ma, 64, 8))
			wr.Flags |= verbs.FlagConditional
			c.ID = 3
			post(t, pr.qa, c, wr)
			wcs = waitN(t, pr.a.cq, 2)
			check(t, wcs[0], 3, verbs.StatusSuccess)
			check(t, wcs[1], 4, verbs.StatusSkipped)
			if u64(pr.mb.Bytes(), 512) != 0 {
				t.Error("the skipped WRITE wrote")
			}
		}),
		parallel("OperandPostChecks", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			w := rdma(1, verbs.OpRead, pr.mb, 0, sg(pr.ma, 0, 8))
			w.Flags |= verbs.FlagRedirect
			w.RemoteLen = 8
			wantPostErr(t, pr.qa.PostSend([]verbs.SendWR{w}), 0, verbs.ErrInvalidArg) // a scatter list
			w = rdma(2, verbs.OpWrite, pr.mb, 0)
			w.Flags |= verbs.FlagRedirect
			w.RemoteLen = 8
			wantPostErr(t, pr.qa.PostSend([]verbs.SendWR{w}), 0, verbs.ErrNotSupported)
			s := send(3)
			s.Flags |= verbs.FlagIndirectArg
			s.RemoteLen = 8
			wantPostErr(t, pr.qa.PostSend([]verbs.SendWR{s}), 0, verbs.ErrNotSupported)
			w = rdma(4, verbs.OpWrite, pr.mb, 0)
			w.Flags |= verbs.FlagIndirectArg
			wantPostErr(t, pr.qa.PostSend([]verbs.SendWR{w}), 0, verbs.ErrInvalidArg) // no RemoteLen
		}),
	}
}

// allocateCases cover PRISM's ALLOCATE and the free lists behind it.
func allocateCases() []Case {
	freeLists := func(t *testing.T, m verbs.MR) verbs.FreeLists {
		t.Helper()
		fl, ok := m.(verbs.FreeLists)
		if !ok {
			t.Fatalf("%T does not implement verbs.FreeLists", m)
		}
		return fl
	}
	alloc := func(id uint64, r verbs.MR, queue uint32, sgl ...verbs.SGE) verbs.SendWR {
		return verbs.SendWR{ID: id, Opcode: verbs.OpAllocate, Flags: verbs.FlagSignaled, SGL: sgl, RKey: r.RKey(), Queue: queue}
	}
	return []Case{
		parallel("Allocate", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			fl := freeLists(t, pr.mb)
			must(t, fl.PostFree(3, 64, pr.mb.Addr()+1024, pr.mb.Addr()+1088))
			if n := fl.FreeLen(3); n != 2 {
				t.Fatalf("FreeLen %d, want 2", n)
			}
			fill(pr.ma.Bytes()[:20], 0x61)
			seen := map[uint64]bool{}
			for id := uint64(1); id <= 2; id++ {
				wc := expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, alloc(id, pr.mb, 3, sg(pr.ma, 0, 20)))
				if wc.Opcode != verbs.WCAllocate || wc.ByteLen != 20 {
					t.Errorf("completion %+v", wc)
				}
				off := int(wc.Result - pr.mb.Addr())
				if (off != 1024 && off != 1088) || seen[wc.Result] {
					t.Fatalf("ALLOCATE returned %#x (offset %d)", wc.Result, off)
				}
				seen[wc.Result] = true
				equal(t, "allocated buffer", pr.mb.Bytes()[off:off+20], pr.ma.Bytes()[:20])
			}
			if n := fl.FreeLen(3); n != 0 {
				t.Errorf("FreeLen %d after two ALLOCATEs, want 0", n)
			}
			expect(t, pr.qa, pr.a.cq, verbs.StatusRemOpErr, alloc(3, pr.mb, 3, sg(pr.ma, 0, 20)))
			waitState(t, pr.qa, verbs.StateError)
		}),
		parallel("AllocateWaitsForBuffers", func(t *testing.T, p Provider) {
			// An empty free list NAKs the ALLOCATE like a missing
			// receive NAKs a SEND: retried while RNRRetry allows (here
			// forever), so buffers posted meanwhile serve it.
			pr := newPair(t, p, pairOpts{connA: connOpts{rnrRetry: verbs.InfiniteRNRRetry, minRNR: time.Millisecond}})
			fl := freeLists(t, pr.mb)
			fill(pr.ma.Bytes()[:16], 0x62)
			post(t, pr.qa, alloc(9, pr.mb, 5, sg(pr.ma, 0, 16)))
			quiet(t, pr.a.cq)
			must(t, fl.PostFree(5, 64, pr.mb.Addr()+2048))
			wc := wait1(t, pr.a.cq)
			check(t, wc, 9, verbs.StatusSuccess)
			if wc.Result != pr.mb.Addr()+2048 {
				t.Fatalf("ALLOCATE returned %#x, want the buffer posted during its wait", wc.Result)
			}
			equal(t, "allocated buffer", pr.mb.Bytes()[2048:2064], pr.ma.Bytes()[:16])
		}),
		parallel("AllocateChecks", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			fl := freeLists(t, pr.mb)
			if err := fl.PostFree(1, 64, pr.mb.Addr()+4096-32); err == nil {
				t.Error("PostFree of a buffer past the region succeeded")
			}
			must(t, fl.PostFree(1, 64, pr.mb.Addr()+512))
			if err := fl.PostFree(1, 128, pr.mb.Addr()+1024); err == nil {
				t.Error("PostFree of another size to the same queue succeeded")
			}
			fl.Quiesce()
			expect(t, pr.qa, pr.a.cq, verbs.StatusRemInvReqErr, alloc(1, pr.mb, 1, sg(pr.ma, 0, 100)))
			pr = newPair(t, p, pairOpts{})
			w := alloc(2, pr.mb, 1)
			wantPostErr(t, pr.qa.PostSend([]verbs.SendWR{w}), 0, verbs.ErrInvalidArg) // no payload
			w = alloc(3, pr.mb, 1, sg(pr.ma, 0, 8))
			w.Flags |= verbs.FlagIndirect
			wantPostErr(t, pr.qa.PostSend([]verbs.SendWR{w}), 0, verbs.ErrNotSupported)
		}),
		parallel("AllocateWriteInstall", func(t *testing.T, p Provider) {
			// PRISM-KV's PUT in one post list: ALLOCATE the new item with
			// its address redirected to the scratch area, then a
			// conditional CAS installs that address in the slot if the
			// slot still holds the old one. A READ through the slot then
			// returns the new item.
			pr := newPair(t, p, pairOpts{})
			fl := freeLists(t, pr.mb)
			must(t, fl.PostFree(0, 64, pr.mb.Addr()+2048, pr.mb.Addr()+2112))
			const slot = 0
			old := pr.mb.Addr() + 1024
			put64(pr.mb.Bytes(), slot, old)
			fill(pr.ma.Bytes()[:32], 0x24)
			a := alloc(1, pr.mb, 0, sg(pr.ma, 0, 32))
			a.Flags |= verbs.FlagRedirect
			a.RedirectAddr = verbs.ScratchAddr(8)
			c := cas(2, pr.mb, slot, sg(pr.ma, 64, 8), old, 0)
			c.Flags |= verbs.FlagIndirectArg | verbs.FlagConditional
			c.ArgAddr = verbs.ScratchAddr(8)
			post(t, pr.qa, a, c)
			wcs := waitN(t, pr.a.cq, 2)
			check(t, wcs[0], 1, verbs.StatusSuccess)
			check(t, wcs[1], 2, verbs.StatusSuccess)
			if wcs[0].Result != 0 {
				t.Errorf("a redirected ALLOCATE returned %#x", wcs[0].Result)
			}
			installed := u64(pr.mb.Bytes(), slot)
			if installed != pr.mb.Addr()+2048 && installed != pr.mb.Addr()+2112 {
				t.Fatalf("slot holds %#x, not an allocated buffer", installed)
			}
			r := rdma(3, verbs.OpRead, pr.mb, slot, sg(pr.ma, 128, 32))
			r.Flags |= verbs.FlagIndirect
			expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, r)
			equal(t, "the installed item", pr.ma.Bytes()[128:160], pr.ma.Bytes()[:32])
			// A second PUT that lost the race (the slot moved on): its CAS
			// fails and the chain reports it; the buffer it filled is the
			// client's to return.
			a.ID, c.ID = 4, 5
			post(t, pr.qa, a, c)
			wcs = waitN(t, pr.a.cq, 2)
			check(t, wcs[0], 4, verbs.StatusSuccess)
			check(t, wcs[1], 5, verbs.StatusSuccess)
			if u64(pr.ma.Bytes(), 64) != installed || u64(pr.mb.Bytes(), slot) != installed {
				t.Errorf("the losing CAS saw %#x and left %#x; want %#x both", u64(pr.ma.Bytes(), 64), u64(pr.mb.Bytes(), slot), installed)
			}
		}),
	}
}
