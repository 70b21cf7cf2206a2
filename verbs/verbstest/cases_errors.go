package verbstest

import (
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// remoteOpNames are the keys of remoteOps, in a fixed order.
var remoteOpNames = []string{"WRITE", "READ", "CAS", "FAA"}

// remoteOps are one-sided requests of each kind against remote region r
// at offset off, each returning into local region l.
func remoteOps(l, r verbs.MR, off int) map[string]verbs.SendWR {
	return map[string]verbs.SendWR{
		"WRITE": rdma(1, verbs.OpWrite, r, off, sg(l, 0, 8)),
		"READ":  rdma(1, verbs.OpRead, r, off, sg(l, 0, 8)),
		"CAS":   cas(1, r, off, sg(l, 0, 8), 0, 1),
		"FAA":   faa(1, r, off, sg(l, 0, 8), 1),
	}
}

// failsWith posts w on a fresh pair prepared by setup and checks that it
// completes with st, that the QP moves to ERROR and that the remote
// region is untouched.
func failsWith(t *testing.T, p Provider, o pairOpts, st verbs.Status, mk func(pr *pair) verbs.SendWR) {
	t.Helper()
	pr := newPair(t, p, o)
	w := mk(pr)
	expect(t, pr.qa, pr.a.cq, st, w)
	waitState(t, pr.qa, verbs.StateError)
	zero(t, "remote region", pr.mb.Bytes())
}

// errorCases cover every error status and every post-time rejection.
func errorCases() []Case {
	return []Case{
		parallel("BadRKey", func(t *testing.T, p Provider) {
			for _, name := range remoteOpNames {
				t.Run(name, func(t *testing.T) {
					failsWith(t, p, pairOpts{}, verbs.StatusRemAccessErr, func(pr *pair) verbs.SendWR {
						w := remoteOps(pr.ma, pr.mb, 0)[name]
						w.RKey ^= 0x5a5a5a5a
						return w
					})
				})
			}
		}),
		parallel("RemoteOutOfBounds", func(t *testing.T, p Provider) {
			for _, tc := range []struct {
				name string
				off  int64
			}{{"past end", 4096}, {"straddles end", 4088 + 4}, {"before start", -8}, {"wraps", -1 << 62}} {
				t.Run(tc.name, func(t *testing.T) {
					for _, name := range remoteOpNames {
						if name != "WRITE" && name != "READ" && tc.name == "straddles end" {
							continue // misaligned: a different error
						}
						failsWith(t, p, pairOpts{}, verbs.StatusRemAccessErr, func(pr *pair) verbs.SendWR {
							w := remoteOps(pr.ma, pr.mb, 0)[name]
							w.RemoteAddr = pr.mb.Addr() + uint64(tc.off)
							return w
						})
					}
				})
			}
		}),
		parallel("MRMissingRemoteAccess", func(t *testing.T, p Provider) {
			for name, acc := range map[string]verbs.Access{
				"WRITE": verbs.AccessLocalWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic,
				"READ":  verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteAtomic,
				"CAS":   verbs.AccessLocalWrite | verbs.AccessRemoteRead | verbs.AccessRemoteWrite,
				"FAA":   verbs.AccessLocalWrite | verbs.AccessRemoteRead | verbs.AccessRemoteWrite,
			} {
				t.Run(name, func(t *testing.T) {
					pr := newPair(t, p, pairOpts{})
					r := pr.b.mr(t, 64, acc)
					expect(t, pr.qa, pr.a.cq, verbs.StatusRemAccessErr, remoteOps(pr.ma, r, 0)[name])
					waitState(t, pr.qa, verbs.StateError)
					zero(t, "remote", r.Bytes())
				})
			}
		}),
		parallel("QPMissingRemoteAccess", func(t *testing.T, p Provider) {
			for name, deny := range map[string]verbs.Access{"WRITE": verbs.AccessRemoteWrite, "READ": verbs.AccessRemoteRead, "CAS": verbs.AccessRemoteAtomic, "FAA": verbs.AccessRemoteAtomic} {
				t.Run(name, func(t *testing.T) {
					failsWith(t, p, pairOpts{denyB: deny}, verbs.StatusRemAccessErr, func(pr *pair) verbs.SendWR {
						return remoteOps(pr.ma, pr.mb, 0)[name]
					})
				})
			}
		}),
		parallel("QPAccessAllowsOthers", func(t *testing.T, p Provider) {
			// A QP without remote write still serves READs.
			pr := newPair(t, p, pairOpts{denyB: verbs.AccessRemoteWrite | verbs.AccessRemoteAtomic})
			put64(pr.mb.Bytes(), 0, 99)
			expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, rdma(1, verbs.OpRead, pr.mb, 0, sg(pr.ma, 0, 8)))
			if u64(pr.ma.Bytes(), 0) != 99 {
				t.Fatal("READ through a QP allowing only reads returned wrong data")
			}
		}),
		parallel("DeregisteredRemoteMR", func(t *testing.T, p Provider) {
			for _, name := range remoteOpNames {
				t.Run(name, func(t *testing.T) {
					pr := newPair(t, p, pairOpts{})
					r := pr.b.mr(t, 64, verbs.AccessAll)
					w := remoteOps(pr.ma, r, 0)[name]
					must(t, r.Deregister())
					expect(t, pr.qa, pr.a.cq, verbs.StatusRemAccessErr, w)
					waitState(t, pr.qa, verbs.StateError)
				})
			}
		}),
		parallel("DeregisteredLocalMR", func(t *testing.T, p Provider) {
			for _, name := range remoteOpNames {
				t.Run(name, func(t *testing.T) {
					failsWith(t, p, pairOpts{}, verbs.StatusLocProtErr, func(pr *pair) verbs.SendWR {
						l := pr.a.mr(t, 64, verbs.AccessAll)
						w := remoteOps(l, pr.mb, 0)[name]
						must(t, l.Deregister())
						return w
					})
				})
			}
		}),
		parallel("MisalignedAtomic", func(t *testing.T, p Provider) {
			for _, tc := range []struct {
				name string
				mk   func(pr *pair) verbs.SendWR
			}{
				{"CAS+4", func(pr *pair) verbs.SendWR { return cas(1, pr.mb, 4, sg(pr.ma, 0, 8), 0, 1) }},
				{"FAA+1", func(pr *pair) verbs.SendWR { return faa(1, pr.mb, 1, sg(pr.ma, 0, 8), 1) }},
				{"MaskedCAS16+8", func(pr *pair) verbs.SendWR {
					return masked(1, verbs.OpMaskedCmpAndSwp, pr.mb, 8, sg(pr.ma, 0, 16), verbs.AtomicArgs{Size: 16, SwapMask: [4]uint64{ones, ones}})
				}},
				{"MaskedFAA32+16", func(pr *pair) verbs.SendWR {
					return masked(1, verbs.OpMaskedFetchAndAdd, pr.mb, 16, sg(pr.ma, 0, 32), verbs.AtomicArgs{Size: 32, Swap: [4]uint64{1, 1, 1, 1}})
				}},
			} {
				t.Run(tc.name, func(t *testing.T) { failsWith(t, p, pairOpts{}, verbs.StatusRemInvReqErr, tc.mk) })
			}
		}),
		parallel("RemoteMRInOtherPD", func(t *testing.T, p Provider) {
			failsWith(t, p, pairOpts{}, verbs.StatusRemAccessErr, func(pr *pair) verbs.SendWR {
				pd2, err := pr.b.dev.AllocPD()
				must(t, err)
				r, err := pd2.AllocMR(64, verbs.AccessAll)
				must(t, err)
				return rdma(1, verbs.OpWrite, r, 0, sg(pr.ma, 0, 8))
			})
		}),
		parallel("LocalMRInOtherPD", func(t *testing.T, p Provider) {
			for _, name := range remoteOpNames {
				t.Run(name, func(t *testing.T) {
					failsWith(t, p, pairOpts{}, verbs.StatusLocProtErr, func(pr *pair) verbs.SendWR {
						pd2, err := pr.a.dev.AllocPD()
						must(t, err)
						l, err := pd2.AllocMR(64, verbs.AccessAll)
						must(t, err)
						return remoteOps(l, pr.mb, 0)[name]
					})
				})
			}
		}),
		parallel("BadLKey", func(t *testing.T, p Provider) {
			for _, name := range remoteOpNames {
				t.Run(name, func(t *testing.T) {
					failsWith(t, p, pairOpts{}, verbs.StatusLocProtErr, func(pr *pair) verbs.SendWR {
						w := remoteOps(pr.ma, pr.mb, 0)[name]
						w.SGL[0].LKey ^= 0xffff00
						return w
					})
				})
			}
		}),
		parallel("LocalSGEOutOfBounds", func(t *testing.T, p Provider) {
			for _, name := range remoteOpNames {
				t.Run(name, func(t *testing.T) {
					failsWith(t, p, pairOpts{}, verbs.StatusLocProtErr, func(pr *pair) verbs.SendWR {
						w := remoteOps(pr.ma, pr.mb, 0)[name]
						w.SGL[0].Addr = pr.ma.Addr() + 4092
						return w
					})
				})
			}
			t.Run("SEND", func(t *testing.T) {
				pr := newPair(t, p, pairOpts{})
				postRecv(t, pr.qb, 1, sg(pr.mb, 0, 64))
				expect(t, pr.qa, pr.a.cq, verbs.StatusLocProtErr, send(1, sg(pr.ma, 0, 8), verbs.SGE{Addr: pr.ma.Addr() - 8, Length: 16, LKey: pr.ma.LKey()}))
				quiet(t, pr.b.cq)
			})
		}),
		parallel("LocalDestWithoutLocalWrite", func(t *testing.T, p Provider) {
			for _, name := range remoteOpNames {
				if name == "WRITE" {
					continue // a WRITE only reads local memory
				}
				t.Run(name, func(t *testing.T) {
					failsWith(t, p, pairOpts{}, verbs.StatusLocProtErr, func(pr *pair) verbs.SendWR {
						l := pr.a.mr(t, 64, verbs.AccessRemoteRead)
						return remoteOps(l, pr.mb, 0)[name]
					})
				})
			}
			t.Run("WRITE source needs no LOCAL_WRITE", func(t *testing.T) {
				pr := newPair(t, p, pairOpts{})
				l := pr.a.mr(t, 64, 0)
				expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, rdma(1, verbs.OpWrite, pr.mb, 0, sg(l, 0, 8)))
			})
		}),
		parallel("RecvWithoutLocalWrite", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			r := pr.b.mr(t, 64, verbs.AccessRemoteRead)
			postRecv(t, pr.qb, 5, sg(r, 0, 64))
			post(t, pr.qa, send(1, sg(pr.ma, 0, 8)))
			check(t, wait1(t, pr.b.cq), 5, verbs.StatusLocProtErr)
			if wc := wait1(t, pr.a.cq); wc.ID != 1 || wc.Status == verbs.StatusSuccess {
				t.Fatalf("sender completion %s, want an error", fmtWCs([]verbs.WC{wc}))
			}
		}),
		parallel("RNRNoRetry", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{connA: connOpts{rnrRetry: verbs.NoRNRRetry}})
			expect(t, pr.qa, pr.a.cq, verbs.StatusRNRRetryExcErr, send(1, sg(pr.ma, 0, 8)))
			waitState(t, pr.qa, verbs.StateError)
			quiet(t, pr.b.cq)
		}),
		parallel("RNRWriteWithImm", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{connA: connOpts{rnrRetry: verbs.NoRNRRetry}})
			expect(t, pr.qa, pr.a.cq, verbs.StatusRNRRetryExcErr, rdma(1, verbs.OpWriteWithImm, pr.mb, 0, sg(pr.ma, 0, 8)))
			waitState(t, pr.qa, verbs.StateError)
		}),
		parallel("RNRRetryExceeded", func(t *testing.T, p Provider) {
			for _, n := range []int{1, 2, 3} {
				pr := newPair(t, p, pairOpts{connA: connOpts{rnrRetry: n, minRNR: time.Millisecond}})
				expect(t, pr.qa, pr.a.cq, verbs.StatusRNRRetryExcErr, send(1, sg(pr.ma, 0, 8)), send(2, sg(pr.ma, 0, 8)))
				check(t, wait1(t, pr.a.cq), 2, verbs.StatusWRFlushErr)
				waitState(t, pr.qa, verbs.StateError)
			}
		}),
		parallel("RNRRecvPostedDuringRetry", func(t *testing.T, p Provider) {
			// Six retries 200 ms apart: over a second to post the receive.
			pr := newPair(t, p, pairOpts{connA: connOpts{rnrRetry: 6, minRNR: 200 * time.Millisecond}})
			copy(pr.ma.Bytes(), "late")
			post(t, pr.qa, send(1, sg(pr.ma, 0, 4)))
			postRecv(t, pr.qb, 9, sg(pr.mb, 0, 64))
			checkOp(t, wait1(t, pr.a.cq), 1, verbs.WCSend)
			checkOp(t, wait1(t, pr.b.cq), 9, verbs.WCRecv)
			equal(t, "received", pr.mb.Bytes()[:4], []byte("late"))
		}),
		parallel("RNRInfiniteRetry", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{connA: connOpts{rnrRetry: verbs.InfiniteRNRRetry, minRNR: time.Millisecond}})
			post(t, pr.qa, send(1, sg(pr.ma, 0, 4)), send(2, sg(pr.ma, 0, 4)))
			quiet(t, pr.a.cq) // far more than DefaultRNRRetry timers
			postRecv(t, pr.qb, 9, sg(pr.mb, 0, 64))
			postRecv(t, pr.qb, 10, sg(pr.mb, 64, 64))
			for i, wc := range waitN(t, pr.a.cq, 2) {
				checkOp(t, wc, uint64(i+1), verbs.WCSend)
			}
			for i, wc := range waitN(t, pr.b.cq, 2) {
				checkOp(t, wc, uint64(i+9), verbs.WCRecv)
			}
		}),
		parallel("RecvTooSmall", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			postRecv(t, pr.qb, 5, sg(pr.mb, 0, 10))
			post(t, pr.qa, send(1, sg(pr.ma, 0, 20)))
			check(t, wait1(t, pr.b.cq), 5, verbs.StatusLocLenErr)
			check(t, wait1(t, pr.a.cq), 1, verbs.StatusRemInvReqErr)
			waitState(t, pr.qa, verbs.StateError)
			waitState(t, pr.qb, verbs.StateError)
		}),
		parallel("PostInError", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			must(t, pr.qa.Modify(verbs.QPAttr{State: verbs.StateError}))
			w := rdma(1, verbs.OpWrite, pr.mb, 0, sg(pr.ma, 0, 8))
			w2 := rdma(2, verbs.OpWrite, pr.mb, 0, sg(pr.ma, 0, 8))
			w2.Flags = 0 // flushed requests complete, signaled or not
			put64(pr.ma.Bytes(), 0, 5)
			post(t, pr.qa, w, w2)
			for i, wc := range waitN(t, pr.a.cq, 2) {
				check(t, wc, uint64(i+1), verbs.StatusWRFlushErr)
			}
			postRecv(t, pr.qa, 3, sg(pr.ma, 0, 8))
			wc := wait1(t, pr.a.cq)
			check(t, wc, 3, verbs.StatusWRFlushErr)
			zero(t, "remote", pr.mb.Bytes())
		}),
		parallel("ModifyToErrorFlushes", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{connA: connOpts{rnrRetry: verbs.InfiniteRNRRetry, minRNR: time.Millisecond}})
			post(t, pr.qa, send(1, sg(pr.ma, 0, 4)), send(2, sg(pr.ma, 0, 4)))
			must(t, pr.qa.Modify(verbs.QPAttr{State: verbs.StateError}))
			for i, wc := range waitN(t, pr.a.cq, 2) {
				check(t, wc, uint64(i+1), verbs.StatusWRFlushErr)
			}
			// Posted receives flush too. A fresh pair: on an asynchronous
			// transport the flushed SENDs above may still be on their way
			// to pr.qb, and whether a request flushed in flight took effect
			// at the responder is undefined (as on RDMA hardware).
			pr2 := newPair(t, p, pairOpts{})
			postRecv(t, pr2.qb, 7, sg(pr2.mb, 0, 8))
			postRecv(t, pr2.qb, 8, sg(pr2.mb, 0, 8))
			must(t, pr2.qb.Modify(verbs.QPAttr{State: verbs.StateError}))
			for i, wc := range waitN(t, pr2.b.cq, 2) {
				check(t, wc, uint64(i+7), verbs.StatusWRFlushErr)
			}
		}),
		parallel("FlushAfterRemoteError", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			put64(pr.ma.Bytes(), 0, 77)
			bad := rdma(1, verbs.OpWrite, pr.mb, 0, sg(pr.ma, 0, 8))
			bad.RKey ^= 0x5a5a5a5a
			w := rdma(2, verbs.OpWrite, pr.mb, 0, sg(pr.ma, 0, 8))
			w.Flags = 0
			r := rdma(3, verbs.OpRead, pr.mb, 0, sg(pr.ma, 8, 8))
			f := faa(4, pr.mb, 8, sg(pr.ma, 16, 8), 1)
			post(t, pr.qa, bad, w, r, f)
			wcs := waitN(t, pr.a.cq, 4)
			check(t, wcs[0], 1, verbs.StatusRemAccessErr)
			for i, wc := range wcs[1:] {
				check(t, wc, uint64(i+2), verbs.StatusWRFlushErr)
			}
			zero(t, "remote: flushed requests must not execute", pr.mb.Bytes())
			if pr.qa.State() != verbs.StateError {
				t.Fatalf("QP in %v, want ERROR", pr.qa.State())
			}
			post(t, pr.qa, rdma(5, verbs.OpWrite, pr.mb, 0, sg(pr.ma, 0, 8)))
			check(t, wait1(t, pr.a.cq), 5, verbs.StatusWRFlushErr)
		}),
		parallel("UnsignaledErrorCompletes", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			w := rdma(1, verbs.OpRead, pr.mb, 0, sg(pr.ma, 0, 8))
			w.Flags = 0
			w.RKey ^= 0x5a5a5a5a
			expect(t, pr.qa, pr.a.cq, verbs.StatusRemAccessErr, w)
		}),
		parallel("SendQueueFull", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{capA: verbs.QPCap{MaxSendWR: 4}})
			un := func(id uint64) verbs.SendWR {
				w := rdma(id, verbs.OpWrite, pr.mb, 0, sg(pr.ma, 0, 8))
				w.Flags = 0
				return w
			}
			for id := uint64(1); id <= 3; id++ {
				post(t, pr.qa, un(id))
			}
			post(t, pr.qa, rdma(4, verbs.OpWrite, pr.mb, 0, sg(pr.ma, 0, 8)))
			// Unsignaled requests hold their slots until a later
			// completion is polled, even once they have executed.
			wantPostErr(t, pr.qa.PostSend([]verbs.SendWR{un(5)}), 0, verbs.ErrQueueFull)
			checkOp(t, wait1(t, pr.a.cq), 4, verbs.WCWrite)
			post(t, pr.qa, un(6), un(7), un(8))
			wantPostErr(t, pr.qa.PostSend([]verbs.SendWR{rdma(9, verbs.OpWrite, pr.mb, 0, sg(pr.ma, 0, 8)), un(10)}), 1, verbs.ErrQueueFull)
			checkOp(t, wait1(t, pr.a.cq), 9, verbs.WCWrite)
			quiet(t, pr.a.cq)
			if pr.qa.State() != verbs.StateRTS {
				t.Fatalf("QP in %v after a full queue, want RTS", pr.qa.State())
			}
		}),
		parallel("RecvQueueFull", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{capB: verbs.QPCap{MaxRecvWR: 2}})
			r := func(id uint64) verbs.RecvWR { return verbs.RecvWR{ID: id, SGL: []verbs.SGE{sg(pr.mb, 0, 8)}} }
			wantPostErr(t, pr.qb.PostRecv([]verbs.RecvWR{r(1), r(2), r(3)}), 2, verbs.ErrQueueFull)
			expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, send(1, sg(pr.ma, 0, 8)))
			check(t, wait1(t, pr.b.cq), 1, verbs.StatusSuccess)
			must(t, pr.qb.PostRecv([]verbs.RecvWR{r(4)}))
		}),
		parallel("TooManySGE", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{capA: verbs.QPCap{MaxSendSGE: 2}, capB: verbs.QPCap{MaxRecvSGE: 2}})
			three := []verbs.SGE{sg(pr.ma, 0, 4), sg(pr.ma, 4, 4), sg(pr.ma, 8, 4)}
			postRecv(t, pr.qb, 1, sg(pr.mb, 0, 64))
			wantPostErr(t, pr.qa.PostSend([]verbs.SendWR{rdma(1, verbs.OpWrite, pr.mb, 0, three...)}), 0, verbs.ErrTooManySGE)
			wantPostErr(t, pr.qa.PostSend([]verbs.SendWR{send(1, sg(pr.ma, 0, 4)), send(2, three...)}), 1, verbs.ErrTooManySGE)
			checkOp(t, wait1(t, pr.a.cq), 1, verbs.WCSend)
			check(t, wait1(t, pr.b.cq), 1, verbs.StatusSuccess)
			wantPostErr(t, pr.qb.PostRecv([]verbs.RecvWR{{ID: 1, SGL: three}}), 0, verbs.ErrTooManySGE)
			srq, err := pr.b.pd.CreateSRQ(4, 1)
			must(t, err)
			wantPostErr(t, srq.PostRecv([]verbs.RecvWR{{ID: 1, SGL: three[:2]}}), 0, verbs.ErrTooManySGE)
			quiet(t, pr.a.cq)
		}),
		parallel("BadOpcode", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			for _, op := range []verbs.Opcode{0, 10, 31, 64, 200, 255} {
				wantPostErr(t, pr.qa.PostSend([]verbs.SendWR{rdma(1, op, pr.mb, 0, sg(pr.ma, 0, 8))}), 0, verbs.ErrNotSupported)
			}
			quiet(t, pr.a.cq)
			if pr.qa.State() != verbs.StateRTS {
				t.Fatalf("QP in %v, want RTS", pr.qa.State())
			}
		}),
		parallel("BadFlags", func(t *testing.T, p Provider) {
			pr := newPair(t, p, pairOpts{})
			w := rdma(1, verbs.OpWrite, pr.mb, 0, sg(pr.ma, 0, 8))
			w.Flags |= 1 << 20
			wantPostErr(t, pr.qa.PostSend([]verbs.SendWR{w}), 0, verbs.ErrNotSupported)
			for _, op := range []verbs.Opcode{verbs.OpRead, verbs.OpAtomicCmpAndSwp, verbs.OpAtomicFetchAndAdd} {
				w := rdma(1, op, pr.mb, 0, sg(pr.ma, 0, 8))
				w.Flags |= verbs.FlagInline
				wantPostErr(t, pr.qa.PostSend([]verbs.SendWR{w}), 0, verbs.ErrInvalidArg)
			}
			quiet(t, pr.a.cq)
		}),
	}
}
