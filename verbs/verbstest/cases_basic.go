package verbstest

import (
	"bytes"
	"errors"
	"testing"

	"github.com/rdmakit/rdmakit/verbs"
)

// resourceCases cover opening devices and the life cycle of PDs, MRs,
// CQs, SRQs and QPs.
func resourceCases() []Case {
	return []Case{
		parallel("OpenUnknownScheme", func(t *testing.T, p Provider) {
			d, err := verbs.Open("verbstest-no-such-scheme://x/y")
			if !errors.Is(err, verbs.ErrUnknownScheme) || d != nil {
				t.Fatalf("Open(unknown scheme) = %v, %v; want nil, ErrUnknownScheme", d, err)
			}
		}),
		parallel("OpenBadURI", func(t *testing.T, p Provider) {
			for _, uri := range []string{"://nothing", "no-scheme-at-all", "%zz://x/y", ""} {
				d, err := verbs.Open(uri)
				if !errors.Is(err, verbs.ErrBadURI) || d != nil {
					t.Errorf("Open(%q) = %v, %v; want nil, ErrBadURI", uri, d, err)
				}
			}
		}),
		parallel("DeviceAttr", func(t *testing.T, p Provider) {
			ns := openNodes(t, p, 2)
			for _, n := range ns {
				a := n.dev.Attr()
				if a.Transport == "" || a.MaxMRSize < 1<<20 || a.MaxQPWR < 16 || a.MaxSGE < 1 || a.MaxCQE < 16 || a.MTU < 256 || a.MaxInlineData < 0 {
					t.Errorf("implausible attributes %+v", a)
				}
				if n.dev.Address() == "" {
					t.Error("empty Address")
				}
			}
			if ns[0].dev.Address() == ns[1].dev.Address() {
				t.Errorf("two devices share address %q", ns[0].dev.Address())
			}
		}),
		parallel("AllocMRAccessValidation", func(t *testing.T, p Provider) {
			n := openNodes(t, p, 1)[0]
			for _, a := range []verbs.Access{verbs.AccessRemoteWrite, verbs.AccessRemoteAtomic, verbs.AccessRemoteWrite | verbs.AccessRemoteRead, 1 << 12} {
				if m, err := n.pd.AllocMR(4096, a); !errors.Is(err, verbs.ErrAccess) {
					t.Errorf("AllocMR(access %v) = %v, %v; want ErrAccess", a, m, err)
				}
			}
			for _, a := range []verbs.Access{0, verbs.AccessLocalWrite, verbs.AccessRemoteRead, verbs.AccessAll} {
				m, err := n.pd.AllocMR(4096, a)
				if err != nil {
					t.Errorf("AllocMR(access %v): %v", a, err)
					continue
				}
				if m.Access() != a {
					t.Errorf("MR access %v, want %v", m.Access(), a)
				}
			}
			if _, err := n.pd.AllocMR(0, verbs.AccessAll); !errors.Is(err, verbs.ErrInvalidArg) {
				t.Errorf("AllocMR(0) error %v, want ErrInvalidArg", err)
			}
		}),
		parallel("MRProperties", func(t *testing.T, p Provider) {
			n := openNodes(t, p, 1)[0]
			m1 := n.mr(t, 10000, verbs.AccessAll)
			m2 := n.mr(t, 100, verbs.AccessAll)
			if m1.Len() != 10000 || len(m1.Bytes()) != 10000 || m2.Len() != 100 {
				t.Fatalf("lengths %d/%d/%d", m1.Len(), len(m1.Bytes()), m2.Len())
			}
			zero(t, "new MR", m1.Bytes())
			if m1.LKey() == m2.LKey() || m1.RKey() == m2.RKey() {
				t.Errorf("two MRs share keys: lkeys %#x %#x rkeys %#x %#x", m1.LKey(), m2.LKey(), m1.RKey(), m2.RKey())
			}
			if m1.Addr() < m2.Addr()+100 && m2.Addr() < m1.Addr()+10000 {
				t.Errorf("MR address ranges overlap: %#x+10000 and %#x+100", m1.Addr(), m2.Addr())
			}
			must(t, m2.Deregister())
			if err := m2.Deregister(); err == nil {
				t.Error("second Deregister succeeded")
			}
		}),
		parallel("PDDeallocBusy", func(t *testing.T, p Provider) {
			n := openNodes(t, p, 1)[0]
			pd, err := n.dev.AllocPD()
			must(t, err)
			m, err := pd.AllocMR(4096, verbs.AccessAll)
			must(t, err)
			if err := pd.Dealloc(); !errors.Is(err, verbs.ErrBusy) {
				t.Fatalf("Dealloc with an MR: %v, want ErrBusy", err)
			}
			must(t, m.Deregister())
			q := n.qp(t, qpOpts{pd: pd})
			if err := pd.Dealloc(); !errors.Is(err, verbs.ErrBusy) {
				t.Fatalf("Dealloc with a QP: %v, want ErrBusy", err)
			}
			must(t, q.Destroy())
			must(t, pd.Dealloc())
		}),
		parallel("CQDestroyBusy", func(t *testing.T, p Provider) {
			n := openNodes(t, p, 1)[0]
			cq := n.newCQ(t, 16)
			if cq.Depth() < 16 {
				t.Errorf("Depth() = %d, want ≥ 16", cq.Depth())
			}
			q := n.qp(t, qpOpts{cq: cq})
			if err := cq.Destroy(); !errors.Is(err, verbs.ErrBusy) {
				t.Fatalf("Destroy of a CQ in use: %v, want ErrBusy", err)
			}
			must(t, q.Destroy())
			must(t, cq.Destroy())
		}),
		parallel("SRQDestroyBusy", func(t *testing.T, p Provider) {
			n := openNodes(t, p, 1)[0]
			srq, err := n.pd.CreateSRQ(16, 1)
			must(t, err)
			q := n.qp(t, qpOpts{srq: srq})
			if err := srq.Destroy(); !errors.Is(err, verbs.ErrBusy) {
				t.Fatalf("Destroy of an SRQ in use: %v, want ErrBusy", err)
			}
			must(t, q.Destroy())
			must(t, srq.Destroy())
		}),
		parallel("QPStateMachine", func(t *testing.T, p Provider) {
			ns := openNodes(t, p, 2)
			q := ns[0].qp(t, qpOpts{})
			if q.State() != verbs.StateReset || q.Type() != verbs.RC {
				t.Fatalf("new QP: %v %v, want RC in RESET", q.Type(), q.State())
			}
			bad := func(to verbs.QPState) {
				t.Helper()
				from := q.State()
				if err := q.Modify(verbs.QPAttr{State: to, Dest: ns[1].dev.Address(), DestQPN: q.QPN()}); !errors.Is(err, verbs.ErrInvalidTransition) {
					t.Errorf("%v → %v: %v, want ErrInvalidTransition", from, to, err)
				}
				if q.State() != from {
					t.Errorf("failed %v → %v left the QP in %v", from, to, q.State())
				}
			}
			bad(verbs.StateRTR)
			bad(verbs.StateRTS)
			must(t, q.Modify(verbs.QPAttr{State: verbs.StateInit, Access: verbs.AccessAll}))
			must(t, q.Modify(verbs.QPAttr{State: verbs.StateInit, Access: verbs.AccessAll}))
			bad(verbs.StateRTS)
			must(t, q.Modify(verbs.QPAttr{State: verbs.StateRTR, Dest: ns[1].dev.Address(), DestQPN: q.QPN()}))
			bad(verbs.StateInit)
			bad(verbs.StateRTR)
			must(t, q.Modify(verbs.QPAttr{State: verbs.StateRTS}))
			bad(verbs.StateRTR)
			bad(verbs.StateInit)
			must(t, q.Modify(verbs.QPAttr{State: verbs.StateRTS}))
			must(t, q.Modify(verbs.QPAttr{State: verbs.StateError}))
			if q.State() != verbs.StateError {
				t.Fatalf("state %v, want ERROR", q.State())
			}
			bad(verbs.StateRTS)
			bad(verbs.StateInit)
			must(t, q.Modify(verbs.QPAttr{State: verbs.StateReset}))
			if q.State() != verbs.StateReset {
				t.Fatalf("state %v, want RESET", q.State())
			}
		}),
		parallel("PostBeforeRTS", func(t *testing.T, p Provider) {
			ns := openNodes(t, p, 2)
			m := ns[0].mr(t, 64, verbs.AccessAll)
			q := ns[0].qp(t, qpOpts{})
			w := rdma(1, verbs.OpWrite, m, 0, sg(m, 0, 8))
			wantPostErr(t, q.PostSend([]verbs.SendWR{w}), 0, verbs.ErrInvalidState)
			wantPostErr(t, q.PostRecv([]verbs.RecvWR{{ID: 1, SGL: []verbs.SGE{sg(m, 0, 8)}}}), 0, verbs.ErrInvalidState)
			must(t, q.Modify(verbs.QPAttr{State: verbs.StateInit, Access: verbs.AccessAll}))
			wantPostErr(t, q.PostSend([]verbs.SendWR{w}), 0, verbs.ErrInvalidState)
			must(t, q.Modify(verbs.QPAttr{State: verbs.StateRTR, Dest: ns[1].dev.Address(), DestQPN: q.QPN()}))
			wantPostErr(t, q.PostSend([]verbs.SendWR{w}), 0, verbs.ErrInvalidState)
			quiet(t, ns[0].cq)
		}),
		parallel("ReconnectAfterReset", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			must(t, pr.qa.Modify(verbs.QPAttr{State: verbs.StateError}))
			must(t, pr.qa.Modify(verbs.QPAttr{State: verbs.StateReset}))
			connect(t, pr.qa, pr.b.dev, pr.qb.QPN(), connOpts{access: verbs.AccessAll})
			copy(pr.ma.Bytes(), "again")
			checkOp(t, expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, rdma(3, verbs.OpWrite, pr.mb, 0, sg(pr.ma, 0, 5))), 3, verbs.WCWrite)
			equal(t, "remote", pr.mb.Bytes()[:5], []byte("again"))
		}),
		parallel("CloseDevice", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			must(t, pr.b.dev.Close())
			if _, err := pr.b.dev.AllocPD(); !errors.Is(err, verbs.ErrClosed) {
				t.Errorf("AllocPD after Close: %v, want ErrClosed", err)
			}
			if _, err := pr.b.dev.CreateCQ(4); !errors.Is(err, verbs.ErrClosed) {
				t.Errorf("CreateCQ after Close: %v, want ErrClosed", err)
			}
			// A peer's request to the closed device fails instead of hanging.
			post(t, pr.qa, rdma(1, verbs.OpWrite, pr.mb, 0, sg(pr.ma, 0, 8)))
			wc := wait1(t, pr.a.cq)
			if wc.ID != 1 || wc.Status == verbs.StatusSuccess {
				t.Fatalf("WRITE to a closed device: %s, want an error", fmtWCs([]verbs.WC{wc}))
			}
		}),
	}
}

// opcodeCases exercise every opcode's successful path.
func opcodeCases() []Case {
	return []Case{
		parallel("Send", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			postRecv(t, pr.qb, 7, sg(pr.mb, 100, 64))
			copy(pr.ma.Bytes(), "hello, responder: 32 bytes long!")
			checkOp(t, expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, send(1, sg(pr.ma, 0, 32))), 1, verbs.WCSend)
			wc := wait1(t, pr.b.cq)
			checkOp(t, wc, 7, verbs.WCRecv)
			if wc.ByteLen != 32 || wc.QPN != pr.qb.QPN() || wc.SrcQPN != pr.qa.QPN() || wc.Flags&verbs.WCWithImm != 0 {
				t.Fatalf("receive completion %+v: want len 32, qpn %d, src qpn %d, no imm", wc, pr.qb.QPN(), pr.qa.QPN())
			}
			checkSource(t, pr.b.pd, &wc, pr.a.dev)
			equal(t, "received", pr.mb.Bytes()[100:132], pr.ma.Bytes()[:32])
			zero(t, "rest of receive buffer", pr.mb.Bytes()[132:164])
		}),
		parallel("SendWithImm", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			postRecv(t, pr.qb, 7, sg(pr.mb, 0, 64))
			fill(pr.ma.Bytes()[:16], 1)
			w := send(1, sg(pr.ma, 0, 16))
			w.Opcode, w.Imm = verbs.OpSendWithImm, 0xdeadbeef
			checkOp(t, expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, w), 1, verbs.WCSend)
			wc := wait1(t, pr.b.cq)
			checkOp(t, wc, 7, verbs.WCRecv)
			if wc.Flags&verbs.WCWithImm == 0 || wc.Imm != 0xdeadbeef || wc.ByteLen != 16 {
				t.Fatalf("receive completion %+v: want imm 0xdeadbeef, len 16", wc)
			}
			equal(t, "received", pr.mb.Bytes()[:16], pr.ma.Bytes()[:16])
		}),
		parallel("Write", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			fill(pr.ma.Bytes()[:100], 3)
			wc := expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, rdma(1, verbs.OpWrite, pr.mb, 64, sg(pr.ma, 0, 100)))
			checkOp(t, wc, 1, verbs.WCWrite)
			equal(t, "remote", pr.mb.Bytes()[64:164], pr.ma.Bytes()[:100])
			zero(t, "before the write", pr.mb.Bytes()[:64])
			zero(t, "after the write", pr.mb.Bytes()[164:])
			quiet(t, pr.b.cq)
		}),
		parallel("WriteLarge", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{mrSize: 1 << 20})
			fill(pr.ma.Bytes(), 9)
			checkOp(t, expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, rdma(1, verbs.OpWrite, pr.mb, 0, sg(pr.ma, 0, 1<<20))), 1, verbs.WCWrite)
			if !bytes.Equal(pr.mb.Bytes(), pr.ma.Bytes()) {
				t.Fatal("1 MiB WRITE: remote differs")
			}
		}),
		parallel("WriteWithImm", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			postRecv(t, pr.qb, 9, sg(pr.mb, 3000, 100))
			fill(pr.ma.Bytes()[:50], 5)
			w := rdma(1, verbs.OpWriteWithImm, pr.mb, 128, sg(pr.ma, 0, 50))
			w.Imm = 0x01020304
			checkOp(t, expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, w), 1, verbs.WCWrite)
			wc := wait1(t, pr.b.cq)
			checkOp(t, wc, 9, verbs.WCRecvRDMAWithImm)
			if wc.Imm != 0x01020304 || wc.Flags&verbs.WCWithImm == 0 || wc.ByteLen != 50 || wc.QPN != pr.qb.QPN() {
				t.Fatalf("completion %+v: want RECV_RDMA_WITH_IMM imm 0x01020304 len 50", wc)
			}
			equal(t, "written", pr.mb.Bytes()[128:178], pr.ma.Bytes()[:50])
			zero(t, "receive buffer", pr.mb.Bytes()[3000:3100])
		}),
		parallel("Read", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			fill(pr.mb.Bytes(), 11)
			wc := expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, rdma(1, verbs.OpRead, pr.mb, 100, sg(pr.ma, 8, 200)))
			checkOp(t, wc, 1, verbs.WCRead)
			if wc.ByteLen != 200 {
				t.Errorf("READ byte_len %d, want 200", wc.ByteLen)
			}
			equal(t, "read", pr.ma.Bytes()[8:208], pr.mb.Bytes()[100:300])
			zero(t, "outside the read", pr.ma.Bytes()[:8])
			zero(t, "outside the read", pr.ma.Bytes()[208:])
		}),
		parallel("CompareAndSwap", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			put64(pr.mb.Bytes(), 8, 5)
			checkOp(t, expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, cas(1, pr.mb, 8, sg(pr.ma, 0, 8), 5, 9)), 1, verbs.WCCompSwap)
			if o, r := u64(pr.ma.Bytes(), 0), u64(pr.mb.Bytes(), 8); o != 5 || r != 9 {
				t.Fatalf("CAS(5→9) on 5: original %d, remote %d; want 5, 9", o, r)
			}
		}),
		parallel("CompareAndSwapFails", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			put64(pr.mb.Bytes(), 8, 5)
			checkOp(t, expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, cas(1, pr.mb, 8, sg(pr.ma, 0, 8), 4, 9)), 1, verbs.WCCompSwap)
			if o, r := u64(pr.ma.Bytes(), 0), u64(pr.mb.Bytes(), 8); o != 5 || r != 5 {
				t.Fatalf("CAS(4→9) on 5: original %d, remote %d; want 5, 5", o, r)
			}
		}),
		parallel("FetchAndAdd", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			put64(pr.mb.Bytes(), 16, 10)
			checkOp(t, expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, faa(1, pr.mb, 16, sg(pr.ma, 0, 8), 7)), 1, verbs.WCFetchAdd)
			if o, r := u64(pr.ma.Bytes(), 0), u64(pr.mb.Bytes(), 16); o != 10 || r != 17 {
				t.Fatalf("FAA(+7) on 10: original %d, remote %d; want 10, 17", o, r)
			}
			put64(pr.mb.Bytes(), 16, ^uint64(0))
			checkOp(t, expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, faa(2, pr.mb, 16, sg(pr.ma, 8, 8), 2)), 2, verbs.WCFetchAdd)
			if o, r := u64(pr.ma.Bytes(), 8), u64(pr.mb.Bytes(), 16); o != ^uint64(0) || r != 1 {
				t.Fatalf("FAA(+2) on max: original %#x, remote %d; want max, 1 (wrap)", o, r)
			}
			zero(t, "neighbouring words", pr.mb.Bytes()[:16])
			zero(t, "neighbouring words", pr.mb.Bytes()[24:])
		}),
	}
}
