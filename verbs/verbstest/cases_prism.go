package verbstest

import (
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
