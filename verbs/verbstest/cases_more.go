package verbstest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// orderCases cover RC ordering and shared receive queues.
func orderCases() []Case {
	return []Case{
		parallel("WritesThenReadSeesLast", func(t *testing.T, p Provider) {
			const n = 1000
			pr := newPair(t, p, pairOpts{capA: verbs.QPCap{MaxSendWR: 1024}, mrSize: 8 * (n + 1)})
			var list []verbs.SendWR
			for i := 1; i <= n; i++ {
				put64(pr.ma.Bytes(), 8*i, uint64(i))
				w := rdma(uint64(i), verbs.OpWrite, pr.mb, 0, sg(pr.ma, 8*i, 8))
				w.Flags = 0
				if list = append(list, w); len(list) == 100 || i%7 == 0 {
					post(t, pr.qa, list...)
					list = list[:0]
				}
			}
			post(t, pr.qa, list...)
			wc := expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, rdma(n+1, verbs.OpRead, pr.mb, 0, sg(pr.ma, 0, 8)))
			checkOp(t, wc, n+1, verbs.WCRead)
			if got := u64(pr.ma.Bytes(), 0); got != n {
				t.Fatalf("READ after %d WRITEs saw %d, want %d", n, got, n)
			}
		}),
		parallel("CompletionOrder", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			const n = 200
			for i := range n / 5 {
				postRecv(t, pr.qb, uint64(1000+i), sg(pr.mb, 2048+16*i, 16))
			}
			ops := []verbs.Opcode{verbs.OpWrite, verbs.OpRead, verbs.OpAtomicFetchAndAdd, verbs.OpSend, verbs.OpAtomicCmpAndSwp}
			var list []verbs.SendWR
			for i := range n {
				op := ops[i%len(ops)]
				var w verbs.SendWR
				switch op {
				case verbs.OpSend:
					w = send(uint64(i), sg(pr.ma, 8*i, 8))
				case verbs.OpAtomicFetchAndAdd:
					w = faa(uint64(i), pr.mb, 0, sg(pr.ma, 8*i, 8), 1)
				case verbs.OpAtomicCmpAndSwp:
					w = cas(uint64(i), pr.mb, 8, sg(pr.ma, 8*i, 8), uint64(i/5), uint64(i/5+1))
				default:
					w = rdma(uint64(i), op, pr.mb, 16+8*i, sg(pr.ma, 8*i, 8))
				}
				if list = append(list, w); len(list) == 10 {
					post(t, pr.qa, list...)
					list = list[:0]
				}
			}
			for i, wc := range waitN(t, pr.a.cq, n) {
				checkOp(t, wc, uint64(i), verbs.WCOpcodeOf(ops[i%len(ops)]))
			}
			for i, wc := range waitN(t, pr.b.cq, n/5) {
				checkOp(t, wc, uint64(1000+i), verbs.WCRecv)
			}
			if f, c := u64(pr.mb.Bytes(), 0), u64(pr.mb.Bytes(), 8); f != n/5 || c != n/5 {
				t.Fatalf("FAA counter %d, CAS chain %d; want %d each (every CAS saw the previous one)", f, c, n/5)
			}
		}),
		parallel("SRQShared", func(t *testing.T, p Provider) {
			const nqp, per = 3, 20
			ns := openNodes(t, p, 2)
			a, b := ns[0], ns[1]
			srq, err := b.pd.CreateSRQ(nqp*per, 1)
			must(t, err)
			mb := b.mr(t, nqp*per*16, verbs.AccessAll)
			for i := range nqp * per {
				postRecv(t, srq, uint64(i), sg(mb, 16*i, 16))
			}
			ma := a.mr(t, nqp*per*8, verbs.AccessAll)
			var qas, qbs []verbs.QP
			for range nqp {
				qa, qb := a.qp(t, qpOpts{}), b.qp(t, qpOpts{srq: srq})
				connect(t, qa, b.dev, qb.QPN(), connOpts{access: verbs.AccessAll})
				connect(t, qb, a.dev, qa.QPN(), connOpts{access: verbs.AccessAll})
				qas, qbs = append(qas, qa), append(qbs, qb)
			}
			if err := qbs[0].PostRecv([]verbs.RecvWR{{ID: 1, SGL: []verbs.SGE{sg(mb, 0, 8)}}}); err == nil {
				t.Error("PostRecv on a QP attached to an SRQ succeeded")
			}
			// Interleave the senders.
			for s := range per {
				for q := range nqp {
					slot := q*per + s
					put64(ma.Bytes(), 8*slot, uint64(q)<<32|uint64(s))
					post(t, qas[q], send(uint64(slot), sg(ma, 8*slot, 8)))
				}
			}
			for _, wc := range waitN(t, a.cq, nqp*per) {
				check(t, wc, wc.ID, verbs.StatusSuccess)
			}
			seen := map[uint64]bool{}
			next := make([]uint64, nqp)
			for _, wc := range waitN(t, b.cq, nqp*per) {
				checkOp(t, wc, wc.ID, verbs.WCRecv)
				msg := u64(mb.Bytes(), 16*int(wc.ID))
				q, s := int(msg>>32), msg&0xffffffff
				if q >= nqp || wc.QPN != qbs[q].QPN() || wc.SrcQPN != qas[q].QPN() {
					t.Fatalf("message %#x arrived on QP %d from %d; sent by QP %d to QP %d", msg, wc.QPN, wc.SrcQPN, qas[q%nqp].QPN(), qbs[q%nqp].QPN())
				}
				if seen[msg] {
					t.Fatalf("message %#x arrived twice", msg)
				}
				seen[msg] = true
				if s != next[q] {
					t.Fatalf("QP %d delivered message %d, want %d (in order)", q, s, next[q])
				}
				next[q]++
			}
			quiet(t, b.cq)
		}),
		parallel("SRQEmptyIsRNR", func(t *testing.T, p Provider) {
			ns := openNodes(t, p, 2)
			srq, err := ns[1].pd.CreateSRQ(4, 1)
			must(t, err)
			qa, qb := ns[0].qp(t, qpOpts{}), ns[1].qp(t, qpOpts{srq: srq})
			connect(t, qa, ns[1].dev, qb.QPN(), connOpts{access: verbs.AccessAll, rnrRetry: verbs.NoRNRRetry})
			connect(t, qb, ns[0].dev, qa.QPN(), connOpts{access: verbs.AccessAll})
			ma := ns[0].mr(t, 64, verbs.AccessAll)
			expect(t, qa, ns[0].cq, verbs.StatusRNRRetryExcErr, send(1, sg(ma, 0, 8)))
		}),
	}
}

const testQKey = 0x11111111

// udPair is two UD QPs in RTS and an address handle from a to b.
type udPair struct {
	a, b   *node
	qa, qb verbs.QP
	ma, mb verbs.MR
	ah     verbs.AH
	mtu    int
}

func newUD(t testing.TB, p Provider) *udPair {
	t.Helper()
	ns := openNodes(t, p, 2)
	u := &udPair{a: ns[0], b: ns[1], mtu: ns[0].dev.Attr().MTU}
	u.qa, u.qb = u.a.qp(t, qpOpts{typ: verbs.UD}), u.b.qp(t, qpOpts{typ: verbs.UD})
	if u.qa.Type() != verbs.UD {
		t.Fatalf("QP type %v, want UD", u.qa.Type())
	}
	must(t, verbs.ActivateUD(u.qa, testQKey))
	must(t, verbs.ActivateUD(u.qb, testQKey))
	u.ma = u.a.mr(t, u.mtu+8192, verbs.AccessAll)
	u.mb = u.b.mr(t, u.mtu+8192, verbs.AccessAll)
	ah, err := u.a.pd.CreateAH(u.b.dev.Address())
	must(t, err)
	if ah.Address() != u.b.dev.Address() {
		t.Errorf("AH address %q, want %q", ah.Address(), u.b.dev.Address())
	}
	u.ah = ah
	return u
}

// send is a signaled UD SEND of n bytes from ma to qb.
func (u *udPair) send(id uint64, off, n int) verbs.SendWR {
	w := send(id, sg(u.ma, off, n))
	w.AH, w.RemoteQPN, w.RemoteQKey = u.ah, u.qb.QPN(), testQKey
	return w
}

// udCases cover unreliable datagrams.
func udCases() []Case {
	return []Case{
		parallel("UDSend", func(t *testing.T, p Provider) {
			u := newUD(t, p)
			fill(u.ma.Bytes()[:100], 17)
			for i := range verbs.GRHSize {
				u.mb.Bytes()[i] = 0xee
			}
			postRecv(t, u.qb, 4, sg(u.mb, 0, verbs.GRHSize+100))
			checkOp(t, expect(t, u.qa, u.a.cq, verbs.StatusSuccess, u.send(1, 0, 100)), 1, verbs.WCSend)
			wc := wait1(t, u.b.cq)
			checkOp(t, wc, 4, verbs.WCRecv)
			if wc.ByteLen != verbs.GRHSize+100 || wc.Flags&verbs.WCGRH == 0 || wc.Flags&verbs.WCWithImm != 0 {
				t.Fatalf("UD receive %+v: want byte_len %d with WCGRH and no imm", wc, verbs.GRHSize+100)
			}
			if wc.SrcQPN != u.qa.QPN() || wc.QPN != u.qb.QPN() {
				t.Fatalf("UD receive %+v: want src qpn %d, qpn %d", wc, u.qa.QPN(), u.qb.QPN())
			}
			checkSource(t, u.b.pd, &wc, u.a.dev)
			equal(t, "payload after the GRH", u.mb.Bytes()[verbs.GRHSize:verbs.GRHSize+100], u.ma.Bytes()[:100])
		}),
		parallel("UDSendWithImm", func(t *testing.T, p Provider) {
			u := newUD(t, p)
			postRecv(t, u.qb, 4, sg(u.mb, 0, 100))
			w := u.send(1, 0, 10)
			w.Opcode, w.Imm = verbs.OpSendWithImm, 4242
			expect(t, u.qa, u.a.cq, verbs.StatusSuccess, w)
			wc := wait1(t, u.b.cq)
			checkOp(t, wc, 4, verbs.WCRecv)
			if wc.Imm != 4242 || wc.Flags&verbs.WCWithImm == 0 || wc.Flags&verbs.WCGRH == 0 || wc.ByteLen != verbs.GRHSize+10 {
				t.Fatalf("UD receive %+v: want imm 4242, GRH, len %d", wc, verbs.GRHSize+10)
			}
		}),
		parallel("UDWrongQKeyDropped", func(t *testing.T, p Provider) {
			u := newUD(t, p)
			postRecv(t, u.qb, 4, sg(u.mb, 0, 100))
			copy(u.ma.Bytes(), "wrong key")
			copy(u.ma.Bytes()[16:], "right key")
			w := u.send(1, 0, 9)
			w.RemoteQKey = testQKey + 1
			expect(t, u.qa, u.a.cq, verbs.StatusSuccess, w)
			quiet(t, u.b.cq)
			expect(t, u.qa, u.a.cq, verbs.StatusSuccess, u.send(2, 16, 9))
			checkOp(t, wait1(t, u.b.cq), 4, verbs.WCRecv)
			equal(t, "received", u.mb.Bytes()[verbs.GRHSize:verbs.GRHSize+9], []byte("right key"))
			quiet(t, u.b.cq)
		}),
		parallel("UDUnknownQPNDropped", func(t *testing.T, p Provider) {
			u := newUD(t, p)
			postRecv(t, u.qb, 4, sg(u.mb, 0, 100))
			w := u.send(1, 0, 9)
			w.RemoteQPN = u.qb.QPN() + 7777
			expect(t, u.qa, u.a.cq, verbs.StatusSuccess, w)
			quiet(t, u.b.cq)
			expect(t, u.qa, u.a.cq, verbs.StatusSuccess, u.send(2, 0, 9))
			checkOp(t, wait1(t, u.b.cq), 4, verbs.WCRecv)
			if u.qa.State() != verbs.StateRTS {
				t.Fatalf("UD QP in %v after a drop, want RTS", u.qa.State())
			}
		}),
		parallel("UDNoReceiveDropped", func(t *testing.T, p Provider) {
			u := newUD(t, p)
			expect(t, u.qa, u.a.cq, verbs.StatusSuccess, u.send(1, 0, 9))
			quiet(t, u.b.cq)
			postRecv(t, u.qb, 4, sg(u.mb, 0, 100))
			quiet(t, u.b.cq) // the dropped datagram is not delivered later
			expect(t, u.qa, u.a.cq, verbs.StatusSuccess, u.send(2, 0, 9))
			checkOp(t, wait1(t, u.b.cq), 4, verbs.WCRecv)
		}),
		parallel("UDMTU", func(t *testing.T, p Provider) {
			u := newUD(t, p)
			wantPostErr(t, u.qa.PostSend([]verbs.SendWR{u.send(1, 0, u.mtu+1)}), 0, verbs.ErrInvalidArg)
			postRecv(t, u.qb, 4, sg(u.mb, 0, verbs.GRHSize+u.mtu))
			fill(u.ma.Bytes(), 3)
			expect(t, u.qa, u.a.cq, verbs.StatusSuccess, u.send(2, 0, u.mtu))
			wc := wait1(t, u.b.cq)
			if wc.Status != verbs.StatusSuccess || int(wc.ByteLen) != verbs.GRHSize+u.mtu {
				t.Fatalf("MTU-sized datagram: %s, want success with len %d", fmtWCs([]verbs.WC{wc}), verbs.GRHSize+u.mtu)
			}
			equal(t, "payload", u.mb.Bytes()[verbs.GRHSize:verbs.GRHSize+u.mtu], u.ma.Bytes()[:u.mtu])
		}),
		parallel("UDRejectsOneSided", func(t *testing.T, p Provider) {
			u := newUD(t, p)
			for _, w := range remoteOps(u.ma, u.mb, 0) {
				w.AH, w.RemoteQPN, w.RemoteQKey = u.ah, u.qb.QPN(), testQKey
				wantPostErr(t, u.qa.PostSend([]verbs.SendWR{w}), 0, verbs.ErrNotSupported)
			}
			w := rdma(1, verbs.OpWriteWithImm, u.mb, 0, sg(u.ma, 0, 8))
			w.AH = u.ah
			wantPostErr(t, u.qa.PostSend([]verbs.SendWR{w}), 0, verbs.ErrNotSupported)
			noAH := u.send(1, 0, 8)
			noAH.AH = nil
			wantPostErr(t, u.qa.PostSend([]verbs.SendWR{noAH}), 0, verbs.ErrInvalidArg)
			quiet(t, u.a.cq)
		}),
		parallel("UDReplyFromWC", func(t *testing.T, p Provider) {
			u := newUD(t, p)
			postRecv(t, u.qb, 4, sg(u.mb, 0, 100))
			postRecv(t, u.qa, 5, sg(u.ma, 1000, 100))
			copy(u.ma.Bytes(), "ping")
			expect(t, u.qa, u.a.cq, verbs.StatusSuccess, u.send(1, 0, 4))
			wc := wait1(t, u.b.cq)
			checkOp(t, wc, 4, verbs.WCRecv)
			ah, err := u.b.pd.CreateAHFromWC(&wc)
			must(t, err)
			if ah.Address() != u.a.dev.Address() {
				t.Errorf("AH from WC addresses %q, want %q", ah.Address(), u.a.dev.Address())
			}
			copy(u.mb.Bytes()[500:], "pong")
			w := send(2, sg(u.mb, 500, 4))
			w.AH, w.RemoteQPN, w.RemoteQKey = ah, wc.SrcQPN, testQKey
			expect(t, u.qb, u.b.cq, verbs.StatusSuccess, w)
			r := wait1(t, u.a.cq)
			checkOp(t, r, 5, verbs.WCRecv)
			equal(t, "reply", u.ma.Bytes()[1000+verbs.GRHSize:1000+verbs.GRHSize+4], []byte("pong"))
		}),
	}
}

// cqCases cover polling, overruns and the event channel.
func cqCases() []Case {
	return []Case{
		parallel("PollBatches", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			var list []verbs.SendWR
			for i := range 10 {
				list = append(list, rdma(uint64(i), verbs.OpWrite, pr.mb, 0, sg(pr.ma, 0, 8)))
			}
			post(t, pr.qa, list...)
			got := 0
			var wc [3]verbs.WC
			deadline := time.Now().Add(WaitTimeout)
			for got < 10 && time.Now().Before(deadline) {
				n, err := pr.a.cq.Poll(wc[:])
				must(t, err)
				if n > len(wc) {
					t.Fatalf("Poll returned %d > len(wc) %d", n, len(wc))
				}
				for _, w := range wc[:n] {
					if w.ID != uint64(got) {
						t.Fatalf("completion %d, want %d", w.ID, got)
					}
					got++
				}
			}
			if got != 10 {
				t.Fatalf("%d completions, want 10", got)
			}
			if n, err := pr.a.cq.Poll(nil); n != 0 || err != nil {
				t.Fatalf("Poll(nil) = %d, %v", n, err)
			}
		}),
		parallel("CQOverrun", func(t *testing.T, p Provider) {
			ns := openNodes(t, p, 2)
			cq := ns[0].newCQ(t, 4)
			qa, qb := ns[0].qp(t, qpOpts{cq: cq}), ns[1].qp(t, qpOpts{})
			connect(t, qa, ns[1].dev, qb.QPN(), connOpts{access: verbs.AccessAll})
			connect(t, qb, ns[0].dev, qa.QPN(), connOpts{access: verbs.AccessAll})
			ma, mb := ns[0].mr(t, 64, verbs.AccessAll), ns[1].mr(t, 64, verbs.AccessAll)
			for i := range 8 {
				post(t, qa, rdma(uint64(i), verbs.OpWrite, mb, 0, sg(ma, 0, 8)))
			}
			deadline := time.Now().Add(WaitTimeout)
			var wc [16]verbs.WC
			for {
				// An empty poll reports the CQ's state without draining it:
				// on an asynchronous transport the completions trickle in,
				// and draining them as they come would prevent the overrun.
				_, err := cq.Poll(wc[:0])
				if errors.Is(err, verbs.ErrCQOverrun) {
					break
				}
				must(t, err)
				if time.Now().After(deadline) {
					t.Fatal("CQ of depth 4 took 8 completions without reporting ErrCQOverrun")
				}
				time.Sleep(100 * time.Microsecond)
			}
			waitState(t, qa, verbs.StateError)
			// The error is sticky and PollWait reports it rather than hanging.
			if _, err := cq.Poll(wc[:]); !errors.Is(err, verbs.ErrCQOverrun) {
				t.Fatalf("second Poll: %v, want ErrCQOverrun", err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), WaitTimeout)
			defer cancel()
			if _, err := verbs.PollWait(ctx, cq, wc[:], verbs.PollEvent); !errors.Is(err, verbs.ErrCQOverrun) {
				t.Fatalf("PollWait: %v, want ErrCQOverrun", err)
			}
		}),
		parallel("CQWaitTimesOut", func(t *testing.T, p Provider) {
			n := openNodes(t, p, 1)[0]
			must(t, n.cq.ReqNotify(false))
			ctx, cancel := context.WithTimeout(t.Context(), QuietPeriod)
			defer cancel()
			if err := n.cq.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Wait on an idle CQ: %v, want context.DeadlineExceeded", err)
			}
			ctx2, cancel2 := context.WithCancel(t.Context())
			cancel2()
			if err := n.cq.Wait(ctx2); !errors.Is(err, context.Canceled) {
				t.Fatalf("Wait with a cancelled context: %v, want context.Canceled", err)
			}
		}),
		parallel("CQWaitWakes", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			// A completion arriving while Wait blocks wakes it.
			must(t, pr.a.cq.ReqNotify(false))
			done := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), WaitTimeout)
				defer cancel()
				done <- pr.a.cq.Wait(ctx)
			}()
			time.Sleep(time.Millisecond)
			post(t, pr.qa, rdma(1, verbs.OpWrite, pr.mb, 0, sg(pr.ma, 0, 8)))
			if err := <-done; err != nil {
				t.Fatalf("Wait: %v, want a wake-up by the completion", err)
			}
			check(t, wait1(t, pr.a.cq), 1, verbs.StatusSuccess)
			// A completion between ReqNotify and Wait is not missed.
			must(t, pr.a.cq.ReqNotify(false))
			post(t, pr.qa, rdma(2, verbs.OpWrite, pr.mb, 0, sg(pr.ma, 0, 8)))
			ctx, cancel := context.WithTimeout(t.Context(), WaitTimeout)
			defer cancel()
			if err := pr.a.cq.Wait(ctx); err != nil {
				t.Fatalf("Wait after a completion that followed ReqNotify: %v", err)
			}
			check(t, wait1(t, pr.a.cq), 2, verbs.StatusSuccess)
			// Unarmed, a completion leaves no event behind.
			post(t, pr.qa, rdma(3, verbs.OpWrite, pr.mb, 0, sg(pr.ma, 0, 8)))
			check(t, wait1(t, pr.a.cq), 3, verbs.StatusSuccess)
			ctx2, cancel2 := context.WithTimeout(t.Context(), QuietPeriod)
			defer cancel2()
			if err := pr.a.cq.Wait(ctx2); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Wait on an unarmed CQ returned %v, want context.DeadlineExceeded", err)
			}
		}),
		parallel("PollWaitPolicies", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			policies := []verbs.PollPolicy{verbs.PollAdaptive, verbs.PollBusy, verbs.PollEvent, {Spin: 3, Yield: 2, Park: true}}
			id := uint64(0)
			for _, pol := range policies {
				t.Run(pol.String(), func(t *testing.T) {
					var wc [4]verbs.WC
					// A completion already queued.
					id++
					post(t, pr.qa, rdma(id, verbs.OpWrite, pr.mb, 0, sg(pr.ma, 0, 8)))
					ctx, cancel := context.WithTimeout(t.Context(), WaitTimeout)
					defer cancel()
					n, err := verbs.PollWait(ctx, pr.a.cq, wc[:], pol)
					if err != nil || n != 1 || wc[0].ID != id {
						t.Fatalf("PollWait with a queued completion: %d, %v, %s", n, err, fmtWCs(wc[:n]))
					}
					// A completion arriving while it waits.
					id++
					want := id
					go func() {
						time.Sleep(2 * time.Millisecond)
						pr.qa.PostSend([]verbs.SendWR{rdma(want, verbs.OpWrite, pr.mb, 0, sg(pr.ma, 0, 8))})
					}()
					n, err = verbs.PollWait(ctx, pr.a.cq, wc[:], pol)
					if err != nil || n != 1 || wc[0].ID != want {
						t.Fatalf("PollWait with a later completion: %d, %v, %s", n, err, fmtWCs(wc[:n]))
					}
					// Nothing arrives: the context ends the wait.
					ctx2, cancel2 := context.WithTimeout(t.Context(), QuietPeriod)
					defer cancel2()
					if n, err := verbs.PollWait(ctx2, pr.a.cq, wc[:], pol); n != 0 || !errors.Is(err, context.DeadlineExceeded) {
						t.Fatalf("PollWait on an idle CQ: %d, %v; want 0, context.DeadlineExceeded", n, err)
					}
				})
			}
		}),
	}
}
