package verbstest

import (
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// transportCases cover semantics a transport once got wrong by taking a
// shortcut of its own: a FENCE honoured only at the responder, an error
// answer that left the link waiting for answers the responder never
// sends, the scratch area refused on a path that maps the responder's
// regions. Each outcome must not depend on the path a request took.
func transportCases() []Case {
	return []Case{
		parallel("FenceGathersAfterRead", func(t *testing.T, p Provider) {
			// A fenced WRITE whose source is what the READ (or atomic)
			// before it lands must send the landed bytes: it may not be
			// gathered before the READ completes.
			pr := newPair(t, p, pairOpts{})
			for i := range 50 {
				v := uint64(1000 + i)
				put64(pr.mb.Bytes(), 0, v)
				put64(pr.mb.Bytes(), 8, v*3)
				r := rdma(1, verbs.OpRead, pr.mb, 0, sg(pr.ma, 0, 8))
				w := rdma(2, verbs.OpWrite, pr.mb, 64, sg(pr.ma, 0, 8))
				w.Flags |= verbs.FlagFence
				f := faa(3, pr.mb, 8, sg(pr.ma, 8, 8), 1)
				w2 := rdma(4, verbs.OpWrite, pr.mb, 72, sg(pr.ma, 8, 8))
				w2.Flags |= verbs.FlagFence
				post(t, pr.qa, r, w, f, w2)
				for j, wc := range waitN(t, pr.a.cq, 4) {
					check(t, wc, uint64(j+1), verbs.StatusSuccess)
				}
				if got := u64(pr.mb.Bytes(), 64); got != v {
					t.Fatalf("iteration %d: fenced WRITE after READ sent %d, want the READ's %d", i, got, v)
				}
				if got := u64(pr.mb.Bytes(), 72); got != v*3 {
					t.Fatalf("iteration %d: fenced WRITE after FAA sent %d, want the FAA's original %d", i, got, v*3)
				}
			}
		}),
		parallel("ErrorBehindQueuedWork", func(t *testing.T, p Provider) {
			// A remote access error on a request queued behind others
			// (over a transport's request path, not a direct one) is
			// REM_ACCESS_ERR, the requests after it flush, and the next
			// connection between the same devices is unaffected.
			pr := newPair(t, p, pairOpts{})
			a := verbs.AtomicArgs{Size: 8}
			a.Swap[0], a.SwapMask[0] = 1, ^uint64(0)
			bad := map[string]func() verbs.SendWR{
				"masked FAA, bad rkey": func() verbs.SendWR {
					w := masked(2, verbs.OpMaskedFetchAndAdd, pr.mb, 8, sg(pr.ma, 0, 8), a)
					w.RKey ^= 0x5a5a
					return w
				},
				"READ out of bounds": func() verbs.SendWR { return rdma(2, verbs.OpRead, pr.mb, 4090, sg(pr.ma, 0, 16)) },
				"CAS, bad rkey": func() verbs.SendWR {
					w := cas(2, pr.mb, 8, sg(pr.ma, 0, 8), 0, 1)
					w.RKey ^= 0x5a5a
					return w
				},
			}
			for _, name := range []string{"masked FAA, bad rkey", "READ out of bounds", "CAS, bad rkey"} {
				for round := range 3 {
					qa, qb := freshPair(t, pr, connOpts{})
					postRecv(t, qb, 9, sg(pr.mb, 1024, 64))
					post(t, qa, send(1, sg(pr.ma, 0, 8)), bad[name](), rdma(3, verbs.OpRead, pr.mb, 0, sg(pr.ma, 0, 8)))
					wcs := waitN(t, pr.a.cq, 3)
					for j, st := range []verbs.Status{verbs.StatusSuccess, verbs.StatusRemAccessErr, verbs.StatusWRFlushErr} {
						if wcs[j].ID != uint64(j+1) || wcs[j].Status != st {
							t.Fatalf("%s, round %d: completions %s, want SUCCESS, REM_ACCESS_ERR, WR_FLUSH_ERR", name, round, fmtWCs(wcs))
						}
					}
					check(t, wait1(t, pr.b.cq), 9, verbs.StatusSuccess)
				}
			}
		}),
		parallel("RNRNoRetryBehindQueuedWork", func(t *testing.T, p Provider) {
			// A SEND without a receive and without RNR retries is
			// RNR_RETRY_EXC_ERR whatever was in flight on the link.
			pr := newPair(t, p, pairOpts{})
			for round := range 3 {
				qa, _ := freshPair(t, pr, connOpts{rnrRetry: verbs.NoRNRRetry})
				post(t, qa, send(1, sg(pr.ma, 0, 8)), rdma(2, verbs.OpRead, pr.mb, 0, sg(pr.ma, 0, 8)))
				wcs := waitN(t, pr.a.cq, 2)
				if wcs[0].ID != 1 || wcs[0].Status != verbs.StatusRNRRetryExcErr || wcs[1].ID != 2 || wcs[1].Status != verbs.StatusWRFlushErr {
					t.Fatalf("round %d: completions %s, want RNR_RETRY_EXC_ERR, WR_FLUSH_ERR", round, fmtWCs(wcs))
				}
			}
		}),
		parallel("ScratchWithRegionKey", func(t *testing.T, p Provider) {
			// The scratch area ignores the rkey: a plain READ or WRITE
			// there under the key of a region the requester may have
			// mapped is served from the scratch area all the same. A
			// transport may learn of regions asynchronously, so try
			// for a while.
			pr := newPair(t, p, pairOpts{})
			for i := range 40 {
				put64(pr.ma.Bytes(), 0, uint64(i+1))
				w := rdma(1, verbs.OpWrite, pr.mb, 0, sg(pr.ma, 0, 8))
				w.RemoteAddr = verbs.ScratchAddr(8)
				r := rdma(2, verbs.OpRead, pr.mb, 0, sg(pr.ma, 16, 8))
				r.RemoteAddr = verbs.ScratchAddr(8)
				expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, w)
				expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, r)
				if got := u64(pr.ma.Bytes(), 16); got != uint64(i+1) {
					t.Fatalf("iteration %d: scratch read back %d, want %d", i, got, i+1)
				}
				if i%8 == 7 {
					time.Sleep(2 * time.Millisecond) // let a region announcement arrive
				}
			}
		}),
	}
}

// freshPair connects a new RC QP on pr.a to a new one on pr.b (every
// access granted); qa uses conn's requester attributes.
func freshPair(t testing.TB, pr *pair, conn connOpts) (qa, qb verbs.QP) {
	t.Helper()
	qa = pr.a.qp(t, qpOpts{})
	qb = pr.b.qp(t, qpOpts{})
	conn.access = verbs.AccessAll
	connect(t, qa, pr.b.dev, qb.QPN(), conn)
	connect(t, qb, pr.a.dev, qa.QPN(), connOpts{access: verbs.AccessAll})
	return qa, qb
}
