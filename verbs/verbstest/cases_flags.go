package verbstest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// delayIfPossible adds latency between a and b when the provider can, so
// that requests are still in flight when PostSend returns.
func delayIfPossible(t testing.TB, p Provider, a, b verbs.Device) {
	if d, ok := p.(Delayer); ok {
		d.SetLatency(t, a, b, 2*time.Millisecond)
	}
}

// flagCases cover SIGNALED, INLINE, FENCE, SOLICITED, SignalAll,
// scatter/gather lists and zero-length operations.
func flagCases() []Case {
	return []Case{
		parallel("Unsignaled", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			put64(pr.ma.Bytes(), 0, 0x1111)
			put64(pr.ma.Bytes(), 8, 0x2222)
			w1 := rdma(1, verbs.OpWrite, pr.mb, 0, sg(pr.ma, 0, 8))
			w1.Flags = 0
			post(t, pr.qa, w1)
			quiet(t, pr.a.cq)
			post(t, pr.qa, rdma(2, verbs.OpWrite, pr.mb, 8, sg(pr.ma, 8, 8)))
			checkOp(t, wait1(t, pr.a.cq), 2, verbs.WCWrite)
			quiet(t, pr.a.cq)
			if a, b := u64(pr.mb.Bytes(), 0), u64(pr.mb.Bytes(), 8); a != 0x1111 || b != 0x2222 {
				t.Fatalf("remote %#x %#x, want both writes done", a, b)
			}
		}),
		parallel("SignalAll", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{signalAll: true})
			var wrs []verbs.SendWR
			for i := range 3 {
				w := rdma(uint64(10+i), verbs.OpWrite, pr.mb, 8*i, sg(pr.ma, 0, 8))
				w.Flags = 0
				wrs = append(wrs, w)
			}
			post(t, pr.qa, wrs...)
			for i, wc := range waitN(t, pr.a.cq, 3) {
				checkOp(t, wc, uint64(10+i), verbs.WCWrite)
			}
		}),
		parallel("InlineWrite", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			delayIfPossible(t, p, pr.a.dev, pr.b.dev)
			copy(pr.ma.Bytes(), "inline payload!!")
			w := rdma(1, verbs.OpWrite, pr.mb, 0, sg(pr.ma, 0, 16))
			w.Flags |= verbs.FlagInline
			post(t, pr.qa, w)
			copy(pr.ma.Bytes(), "SCRIBBLED OVER!!") // the buffer is reusable at once
			checkOp(t, wait1(t, pr.a.cq), 1, verbs.WCWrite)
			equal(t, "remote", pr.mb.Bytes()[:16], []byte("inline payload!!"))
		}),
		parallel("InlineSend", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			delayIfPossible(t, p, pr.a.dev, pr.b.dev)
			postRecv(t, pr.qb, 5, sg(pr.mb, 0, 64))
			copy(pr.ma.Bytes(), "inline send")
			w := send(1, sg(pr.ma, 0, 11))
			w.Flags |= verbs.FlagInline
			post(t, pr.qa, w)
			copy(pr.ma.Bytes(), "XXXXXXXXXXX")
			checkOp(t, wait1(t, pr.a.cq), 1, verbs.WCSend)
			wc := wait1(t, pr.b.cq)
			checkOp(t, wc, 5, verbs.WCRecv)
			if wc.ByteLen != 11 {
				t.Errorf("byte_len %d, want 11", wc.ByteLen)
			}
			equal(t, "received", pr.mb.Bytes()[:11], []byte("inline send"))
		}),
		parallel("InlineWithoutLKey", func(t *testing.T, p Provider) {
			// FlagInline: "no lkey is needed".
			pr := newPair(t, p, pairOpts{})
			copy(pr.ma.Bytes()[100:], "no lkey")
			w := rdma(1, verbs.OpWrite, pr.mb, 0, verbs.SGE{Addr: pr.ma.Addr() + 100, Length: 7})
			w.Flags |= verbs.FlagInline
			checkOp(t, expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, w), 1, verbs.WCWrite)
			equal(t, "remote", pr.mb.Bytes()[:7], []byte("no lkey"))
		}),
		parallel("InlineTooLarge", func(t *testing.T, p Provider) {
			ns := openNodes(t, p, 2)
			max := min(64, ns[0].dev.Attr().MaxInlineData)
			if max == 0 {
				t.Skip("device has no inline data")
			}
			qa := ns[0].qp(t, qpOpts{cap: verbs.QPCap{MaxInlineData: max}})
			qb := ns[1].qp(t, qpOpts{})
			connect(t, qa, ns[1].dev, qb.QPN(), connOpts{access: verbs.AccessAll})
			connect(t, qb, ns[0].dev, qa.QPN(), connOpts{access: verbs.AccessAll})
			ma, mb := ns[0].mr(t, 4096, verbs.AccessAll), ns[1].mr(t, 4096, verbs.AccessAll)
			w := rdma(1, verbs.OpWrite, mb, 0, sg(ma, 0, max/2), sg(ma, 0, max-max/2+1))
			w.Flags |= verbs.FlagInline
			ok := rdma(2, verbs.OpWrite, mb, 0, sg(ma, 0, max))
			ok.Flags |= verbs.FlagInline
			wantPostErr(t, qa.PostSend([]verbs.SendWR{ok, w}), 1, verbs.ErrInlineTooLarge)
			checkOp(t, wait1(t, ns[0].cq), 2, verbs.WCWrite)
			quiet(t, ns[0].cq)
		}),
		parallel("Fence", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			delayIfPossible(t, p, pr.a.dev, pr.b.dev)
			put64(pr.mb.Bytes(), 0, 1)
			put64(pr.ma.Bytes(), 100, 2)
			put64(pr.ma.Bytes(), 108, 3)
			r1 := rdma(1, verbs.OpRead, pr.mb, 0, sg(pr.ma, 0, 8))
			w := rdma(2, verbs.OpWrite, pr.mb, 0, sg(pr.ma, 100, 8))
			w.Flags |= verbs.FlagFence
			r2 := rdma(3, verbs.OpRead, pr.mb, 0, sg(pr.ma, 8, 8))
			r2.Flags |= verbs.FlagFence
			f := faa(4, pr.mb, 0, sg(pr.ma, 16, 8), 10)
			w2 := rdma(5, verbs.OpWrite, pr.mb, 0, sg(pr.ma, 108, 8))
			w2.Flags |= verbs.FlagFence
			post(t, pr.qa, r1, w, r2, f, w2)
			for i, wc := range waitN(t, pr.a.cq, 5) {
				check(t, wc, uint64(i+1), verbs.StatusSuccess)
			}
			if a, b, c, d := u64(pr.ma.Bytes(), 0), u64(pr.ma.Bytes(), 8), u64(pr.ma.Bytes(), 16), u64(pr.mb.Bytes(), 0); a != 1 || b != 2 || c != 2 || d != 3 {
				t.Fatalf("READ, fenced WRITE, fenced READ, FAA, fenced WRITE saw %d, %d, %d and left %d; want 1, 2, 2, 3", a, b, c, d)
			}
		}),
		parallel("SolicitedNotify", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			rcq := pr.b.newCQ(t, 64)
			qb := pr.b.qp(t, qpOpts{cq: rcq})
			qa := pr.a.qp(t, qpOpts{})
			connect(t, qa, pr.b.dev, qb.QPN(), connOpts{access: verbs.AccessAll})
			connect(t, qb, pr.a.dev, qa.QPN(), connOpts{access: verbs.AccessAll})
			for i := range 3 {
				postRecv(t, qb, uint64(i+1), sg(pr.mb, 64*i, 64))
			}
			must(t, rcq.ReqNotify(true))
			post(t, qa, send(1, sg(pr.ma, 0, 8)))
			check(t, wait1(t, pr.a.cq), 1, verbs.StatusSuccess)
			ctx, cancel := context.WithTimeout(t.Context(), QuietPeriod)
			err := rcq.Wait(ctx)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("CQ armed for solicited events woke on an unsolicited SEND: Wait = %v", err)
			}
			w := send(2, sg(pr.ma, 0, 8))
			w.Flags |= verbs.FlagSolicited
			post(t, qa, w)
			ctx, cancel = context.WithTimeout(t.Context(), WaitTimeout)
			defer cancel()
			if err := rcq.Wait(ctx); err != nil {
				t.Fatalf("solicited SEND did not wake the CQ: %v", err)
			}
			wcs := waitN(t, rcq, 2)
			if wcs[0].Flags&verbs.WCSolicited != 0 || wcs[1].Flags&verbs.WCSolicited == 0 {
				t.Errorf("solicited flags %v, %v; want only the second set", wcs[0].Flags, wcs[1].Flags)
			}
			// An error completion wakes a solicited-only CQ too: the third
			// receive is too small for 100 bytes.
			must(t, rcq.ReqNotify(true))
			w = send(3, sg(pr.ma, 0, 100))
			post(t, qa, w)
			if err := rcq.Wait(ctx); err != nil {
				t.Fatalf("error completion did not wake the solicited-only CQ: %v", err)
			}
			check(t, wait1(t, rcq), 3, verbs.StatusLocLenErr)
		}),
		parallel("GatherWrite", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			m2 := pr.a.mr(t, 256, verbs.AccessLocalWrite)
			fill(pr.ma.Bytes(), 1)
			fill(m2.Bytes(), 200)
			w := rdma(1, verbs.OpWrite, pr.mb, 10, sg(pr.ma, 0, 10), sg(m2, 30, 20), sg(pr.ma, 50, 5))
			expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, w)
			want := append(append(append([]byte{}, pr.ma.Bytes()[:10]...), m2.Bytes()[30:50]...), pr.ma.Bytes()[50:55]...)
			equal(t, "gathered", pr.mb.Bytes()[10:45], want)
			zero(t, "around", pr.mb.Bytes()[:10])
			zero(t, "around", pr.mb.Bytes()[45:])
		}),
		parallel("GatherSend", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			fill(pr.ma.Bytes(), 7)
			postRecv(t, pr.qb, 1, sg(pr.mb, 0, 100))
			expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, send(1, sg(pr.ma, 100, 3), sg(pr.ma, 0, 4), sg(pr.ma, 200, 5)))
			wc := wait1(t, pr.b.cq)
			if wc.ByteLen != 12 {
				t.Fatalf("byte_len %d, want 12", wc.ByteLen)
			}
			b := pr.ma.Bytes()
			equal(t, "received", pr.mb.Bytes()[:12], append(append(append([]byte{}, b[100:103]...), b[:4]...), b[200:205]...))
		}),
		parallel("ScatterRead", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			m2 := pr.a.mr(t, 256, verbs.AccessLocalWrite)
			fill(pr.mb.Bytes(), 33)
			expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, rdma(1, verbs.OpRead, pr.mb, 40, sg(pr.ma, 500, 10), sg(m2, 8, 20), sg(pr.ma, 0, 5)))
			src := pr.mb.Bytes()[40:]
			equal(t, "first", pr.ma.Bytes()[500:510], src[:10])
			equal(t, "second", m2.Bytes()[8:28], src[10:30])
			equal(t, "third", pr.ma.Bytes()[:5], src[30:35])
		}),
		parallel("ScatterRecv", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			fill(pr.ma.Bytes(), 60)
			postRecv(t, pr.qb, 4, sg(pr.mb, 1000, 10), sg(pr.mb, 0, 20), sg(pr.mb, 2000, 30))
			expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, send(1, sg(pr.ma, 0, 45)))
			wc := wait1(t, pr.b.cq)
			checkOp(t, wc, 4, verbs.WCRecv)
			if wc.ByteLen != 45 {
				t.Fatalf("byte_len %d, want 45", wc.ByteLen)
			}
			src := pr.ma.Bytes()
			equal(t, "first", pr.mb.Bytes()[1000:1010], src[:10])
			equal(t, "second", pr.mb.Bytes()[:20], src[10:30])
			equal(t, "third", pr.mb.Bytes()[2000:2015], src[30:45])
			zero(t, "rest of third", pr.mb.Bytes()[2015:2030])
		}),
		parallel("ZeroLengthWrite", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			fill(pr.ma.Bytes(), 1)
			wc := expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, rdma(1, verbs.OpWrite, pr.mb, 0))
			checkOp(t, wc, 1, verbs.WCWrite)
			checkOp(t, expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, rdma(2, verbs.OpWrite, pr.mb, 0, sg(pr.ma, 0, 0))), 2, verbs.WCWrite)
			zero(t, "remote", pr.mb.Bytes())
		}),
		parallel("ZeroLengthRead", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			fill(pr.mb.Bytes(), 1)
			wc := expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, rdma(1, verbs.OpRead, pr.mb, 0))
			checkOp(t, wc, 1, verbs.WCRead)
			if wc.ByteLen != 0 {
				t.Errorf("byte_len %d, want 0", wc.ByteLen)
			}
			zero(t, "local", pr.ma.Bytes())
		}),
		parallel("ZeroLengthSend", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			postRecv(t, pr.qb, 8, sg(pr.mb, 0, 64))
			postRecv(t, pr.qb, 9)
			expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, send(1))
			expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, send(2))
			for i, wc := range waitN(t, pr.b.cq, 2) {
				checkOp(t, wc, uint64(8+i), verbs.WCRecv)
				if wc.ByteLen != 0 {
					t.Errorf("byte_len %d, want 0", wc.ByteLen)
				}
			}
		}),
		parallel("ZeroLengthWriteWithImm", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			postRecv(t, pr.qb, 8)
			w := rdma(1, verbs.OpWriteWithImm, pr.mb, 0)
			w.Imm = 77
			expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, w)
			wc := wait1(t, pr.b.cq)
			checkOp(t, wc, 8, verbs.WCRecvRDMAWithImm)
			if wc.ByteLen != 0 || wc.Imm != 77 {
				t.Errorf("byte_len %d imm %d, want 0, 77", wc.ByteLen, wc.Imm)
			}
		}),
		parallel("PostListStopsAtBadRequest", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			put64(pr.ma.Bytes(), 0, 41)
			put64(pr.ma.Bytes(), 8, 42)
			good := rdma(1, verbs.OpWrite, pr.mb, 0, sg(pr.ma, 0, 8))
			bad := rdma(2, 0, pr.mb, 0, sg(pr.ma, 0, 8))
			after := rdma(3, verbs.OpWrite, pr.mb, 8, sg(pr.ma, 8, 8))
			wantPostErr(t, pr.qa.PostSend([]verbs.SendWR{good, bad, after}), 1, verbs.ErrNotSupported)
			checkOp(t, wait1(t, pr.a.cq), 1, verbs.WCWrite)
			quiet(t, pr.a.cq)
			if u64(pr.mb.Bytes(), 0) != 41 || u64(pr.mb.Bytes(), 8) != 0 {
				t.Fatalf("remote %d %d: the request before the bad one must run, the one after must not", u64(pr.mb.Bytes(), 0), u64(pr.mb.Bytes(), 8))
			}
		}),
	}
}
