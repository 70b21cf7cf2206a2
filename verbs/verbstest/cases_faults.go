package verbstest

import (
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// Retry attributes used by the fault cases: a budget far shorter than
// WaitTimeout, and one far longer than any pause a case makes.
var (
	shortBudget = connOpts{timeout: time.Millisecond, retryCount: 2}
	longBudget  = connOpts{timeout: 400 * time.Millisecond, retryCount: 7}
)

func killer(t *testing.T, p Provider) Killer {
	k, ok := p.(Killer)
	if !ok {
		t.Skipf("%s cannot kill devices", p.Name())
	}
	return k
}

func pauser(t *testing.T, p Provider) Pauser {
	k, ok := p.(Pauser)
	if !ok {
		t.Skipf("%s cannot pause devices", p.Name())
	}
	return k
}

func partitioner(t *testing.T, p Provider) Partitioner {
	k, ok := p.(Partitioner)
	if !ok {
		t.Skipf("%s cannot partition devices", p.Name())
	}
	return k
}

func delayer(t *testing.T, p Provider) Delayer {
	k, ok := p.(Delayer)
	if !ok {
		t.Skipf("%s cannot add latency", p.Name())
	}
	return k
}

// faultCases inject faults through the optional provider capabilities.
func faultCases() []Case {
	return []Case{
		parallel("KillPeer", func(t *testing.T, p Provider) {
			k := killer(t, p)
			pr := newPair(t, p, pairOpts{connA: connOpts{rnrRetry: verbs.InfiniteRNRRetry, minRNR: time.Millisecond}})
			// Three SENDs wait for a receive: in flight when the peer dies.
			post(t, pr.qa, send(1, sg(pr.ma, 0, 8)), send(2, sg(pr.ma, 0, 8)), send(3, sg(pr.ma, 0, 8)))
			k.Kill(t, pr.b.dev)
			wcs := waitN(t, pr.a.cq, 3)
			check(t, wcs[0], 1, verbs.StatusRetryExcErr)
			for i, wc := range wcs[1:] {
				if wc.ID != uint64(i+2) || (wc.Status != verbs.StatusRetryExcErr && wc.Status != verbs.StatusWRFlushErr) {
					t.Fatalf("in-flight request after the first: %s, want RETRY_EXC_ERR or WR_FLUSH_ERR", fmtWCs([]verbs.WC{wc}))
				}
			}
			waitState(t, pr.qa, verbs.StateError)
			post(t, pr.qa, rdma(4, verbs.OpWrite, pr.mb, 0, sg(pr.ma, 0, 8)))
			check(t, wait1(t, pr.a.cq), 4, verbs.StatusWRFlushErr)
			// A QP connected afresh to the dead peer fails its requests.
			q := pr.a.qp(t, qpOpts{})
			connect(t, q, pr.b.dev, pr.qb.QPN(), connOpts{access: verbs.AccessAll})
			for _, w := range remoteOps(pr.ma, pr.mb, 0) {
				w.ID = 5
				post(t, q, w)
				check(t, wait1(t, pr.a.cq), 5, verbs.StatusRetryExcErr)
				waitState(t, q, verbs.StateError)
				must(t, q.Modify(verbs.QPAttr{State: verbs.StateReset}))
				connect(t, q, pr.b.dev, pr.qb.QPN(), connOpts{access: verbs.AccessAll})
			}
		}),
		parallel("KillFlushesLocal", func(t *testing.T, p Provider) {
			k := killer(t, p)
			pr := newPair(t, p, pairOpts{})
			postRecv(t, pr.qb, 7, sg(pr.mb, 0, 8))
			postRecv(t, pr.qb, 8, sg(pr.mb, 8, 8))
			k.Kill(t, pr.b.dev)
			for i, wc := range waitN(t, pr.b.cq, 2) {
				check(t, wc, uint64(7+i), verbs.StatusWRFlushErr)
			}
			waitState(t, pr.qb, verbs.StateError)
			// The surviving side learns of the death on its next request.
			expect(t, pr.qa, pr.a.cq, verbs.StatusRetryExcErr, rdma(1, verbs.OpRead, pr.mb, 0, sg(pr.ma, 0, 8)))
		}),
		parallel("PauseBeyondBudget", func(t *testing.T, p Provider) {
			pz := pauser(t, p)
			pr := newPair(t, p, pairOpts{connA: shortBudget})
			pz.Pause(t, pr.b.dev)
			defer pz.Resume(t, pr.b.dev)
			put64(pr.ma.Bytes(), 0, 1)
			post(t, pr.qa, rdma(1, verbs.OpWrite, pr.mb, 0, sg(pr.ma, 0, 8)), rdma(2, verbs.OpRead, pr.mb, 0, sg(pr.ma, 8, 8)))
			check(t, wait1(t, pr.a.cq), 1, verbs.StatusRetryExcErr)
			check(t, wait1(t, pr.a.cq), 2, verbs.StatusWRFlushErr)
			waitState(t, pr.qa, verbs.StateError)
			zero(t, "remote", pr.mb.Bytes())
		}),
		parallel("PauseResumeWithinBudget", func(t *testing.T, p Provider) {
			pz := pauser(t, p)
			pr := newPair(t, p, pairOpts{connA: longBudget})
			pz.Pause(t, pr.b.dev)
			put64(pr.ma.Bytes(), 0, 42)
			post(t, pr.qa, rdma(1, verbs.OpWrite, pr.mb, 0, sg(pr.ma, 0, 8)), rdma(2, verbs.OpRead, pr.mb, 0, sg(pr.ma, 8, 8)))
			quiet(t, pr.a.cq) // nothing gets through a paused device
			pz.Resume(t, pr.b.dev)
			checkOp(t, wait1(t, pr.a.cq), 1, verbs.WCWrite)
			checkOp(t, wait1(t, pr.a.cq), 2, verbs.WCRead)
			if u64(pr.mb.Bytes(), 0) != 42 || u64(pr.ma.Bytes(), 8) != 42 {
				t.Fatal("requests delayed by a pause did not take effect in order")
			}
		}),
		parallel("PartitionBeyondBudget", func(t *testing.T, p Provider) {
			pt := partitioner(t, p)
			pr := newPair(t, p, pairOpts{nodes: 3, connA: shortBudget})
			c := pr.nodes[2]
			qc, qb := c.qp(t, qpOpts{}), pr.b.qp(t, qpOpts{})
			connect(t, qc, pr.b.dev, qb.QPN(), connOpts{access: verbs.AccessAll})
			connect(t, qb, c.dev, qc.QPN(), connOpts{access: verbs.AccessAll})
			mc := c.mr(t, 64, verbs.AccessAll)
			pt.Partition(t, pr.a.dev, pr.b.dev)
			defer pt.Heal(t, pr.a.dev, pr.b.dev)
			expect(t, pr.qa, pr.a.cq, verbs.StatusRetryExcErr, rdma(1, verbs.OpWrite, pr.mb, 0, sg(pr.ma, 0, 8)))
			waitState(t, pr.qa, verbs.StateError)
			// The partition cuts only the a–b link.
			put64(mc.Bytes(), 0, 9)
			expect(t, qc, c.cq, verbs.StatusSuccess, rdma(2, verbs.OpWrite, pr.mb, 0, sg(mc, 0, 8)))
			if u64(pr.mb.Bytes(), 0) != 9 {
				t.Fatal("WRITE over an intact link did not land")
			}
		}),
		parallel("PartitionHeal", func(t *testing.T, p Provider) {
			pt := partitioner(t, p)
			pr := newPair(t, p, pairOpts{connA: longBudget})
			pt.Partition(t, pr.a.dev, pr.b.dev)
			put64(pr.ma.Bytes(), 0, 5)
			post(t, pr.qa, faa(1, pr.mb, 0, sg(pr.ma, 8, 8), 5), rdma(2, verbs.OpRead, pr.mb, 0, sg(pr.ma, 16, 8)))
			quiet(t, pr.a.cq)
			pt.Heal(t, pr.a.dev, pr.b.dev)
			checkOp(t, wait1(t, pr.a.cq), 1, verbs.WCFetchAdd)
			checkOp(t, wait1(t, pr.a.cq), 2, verbs.WCRead)
			if u64(pr.ma.Bytes(), 8) != 0 || u64(pr.ma.Bytes(), 16) != 5 {
				t.Fatalf("FAA returned %d, READ saw %d; want 0, 5", u64(pr.ma.Bytes(), 8), u64(pr.ma.Bytes(), 16))
			}
		}),
		parallel("Latency", func(t *testing.T, p Provider) {
			dl := delayer(t, p)
			pr := newPair(t, p, pairOpts{})
			dl.SetLatency(t, pr.a.dev, pr.b.dev, time.Millisecond)
			const n = 30
			var list []verbs.SendWR
			for i := 1; i <= n; i++ {
				put64(pr.ma.Bytes(), 8*i, uint64(i))
				list = append(list, rdma(uint64(i), verbs.OpWrite, pr.mb, 0, sg(pr.ma, 8*i, 8)))
			}
			list = append(list, rdma(n+1, verbs.OpRead, pr.mb, 0, sg(pr.ma, 0, 8)))
			postRecv(t, pr.qb, 99, sg(pr.mb, 64, 64))
			list = append(list, send(n+2, sg(pr.ma, 8, 8)))
			post(t, pr.qa, list...)
			for i, wc := range waitN(t, pr.a.cq, n+2) {
				check(t, wc, uint64(i+1), verbs.StatusSuccess)
			}
			if got := u64(pr.ma.Bytes(), 0); got != n {
				t.Fatalf("READ after delayed WRITEs saw %d, want %d", got, n)
			}
			check(t, wait1(t, pr.b.cq), 99, verbs.StatusSuccess)
			dl.SetLatency(t, pr.a.dev, pr.b.dev, 0)
			expect(t, pr.qa, pr.a.cq, verbs.StatusSuccess, rdma(50, verbs.OpRead, pr.mb, 0, sg(pr.ma, 0, 8)))
		}),
	}
}
