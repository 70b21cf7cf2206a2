package nic_test

// The NIC's own tests that need a link to run (benchmarks, the allocation
// guard, the stress and fuzz tests) drive it through the loop transport, the
// thinnest link there is: as an external test package, nic_test may import
// transport/loop, which imports nic, without a cycle.

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/rdmakit/rdmakit/transport/loop"
	"github.com/rdmakit/rdmakit/verbs"
)

var pairSeq atomic.Int64

// pair is two connected RC QPs on two nodes of a fresh loop fabric, with
// a 4 KiB region on each side.
type pair struct {
	cq           verbs.CQ
	qp           verbs.QP
	local, peer  verbs.MR
	dev, peerDev verbs.Device
	pd, peerPD   verbs.PD
}

func newPair(tb testing.TB) *pair {
	tb.Helper()
	f := loop.Get(fmt.Sprintf("bench%d", pairSeq.Add(1)))
	must := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}
	a, err := f.Open("a")
	must(err)
	b, err := f.Open("b")
	must(err)
	tb.Cleanup(func() { a.Close(); b.Close() })
	pa, err := a.AllocPD()
	must(err)
	pb, err := b.AllocPD()
	must(err)
	cqa, err := a.CreateCQ(1024)
	must(err)
	cqb, err := b.CreateCQ(1024)
	must(err)
	qa, err := pa.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cqa, RecvCQ: cqa})
	must(err)
	qb, err := pb.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cqb, RecvCQ: cqb})
	must(err)
	must(verbs.ConnectRC(qa, verbs.AccessAll, b.Address(), qb.QPN()))
	must(verbs.ConnectRC(qb, verbs.AccessAll, a.Address(), qa.QPN()))
	la, err := pa.AllocMR(4096, verbs.AccessAll)
	must(err)
	lb, err := pb.AllocMR(4096, verbs.AccessAll)
	must(err)
	return &pair{cq: cqa, qp: qa, local: la, peer: lb, dev: a, peerDev: b, pd: pa, peerPD: pb}
}

func (p *pair) wr(op verbs.Opcode, n uint32) []verbs.SendWR {
	return []verbs.SendWR{{
		ID: 1, Opcode: op, Flags: verbs.FlagSignaled,
		SGL:        []verbs.SGE{{Addr: p.local.Addr(), Length: n, LKey: p.local.LKey()}},
		RemoteAddr: p.peer.Addr(), RKey: p.peer.RKey(),
		Atomic: verbs.AtomicArgs{Compare: [4]uint64{0}, Swap: [4]uint64{0}},
	}}
}

func (p *pair) roundTrip(tb testing.TB, wrs []verbs.SendWR, wc []verbs.WC) {
	if err := p.qp.PostSend(wrs); err != nil {
		tb.Fatal(err)
	}
	n, err := p.cq.Poll(wc)
	if n != 1 || err != nil || wc[0].Status != verbs.StatusSuccess {
		tb.Fatalf("poll: n=%d err=%v status=%v", n, err, wc[0].Status)
	}
}

func BenchmarkRead8(b *testing.B) {
	p := newPair(b)
	wrs, wc := p.wr(verbs.OpRead, 8), make([]verbs.WC, 4)
	b.ReportAllocs()
	for b.Loop() {
		p.roundTrip(b, wrs, wc)
	}
}

func BenchmarkWrite8(b *testing.B) {
	p := newPair(b)
	wrs, wc := p.wr(verbs.OpWrite, 8), make([]verbs.WC, 4)
	b.ReportAllocs()
	for b.Loop() {
		p.roundTrip(b, wrs, wc)
	}
}

func BenchmarkCAS8(b *testing.B) {
	p := newPair(b)
	wrs, wc := p.wr(verbs.OpAtomicCmpAndSwp, 8), make([]verbs.WC, 4)
	b.ReportAllocs()
	for b.Loop() {
		p.roundTrip(b, wrs, wc)
	}
}

func TestHotPathAllocatesNothing(t *testing.T) {
	p := newPair(t)
	wc := make([]verbs.WC, 4)
	for _, op := range []verbs.Opcode{verbs.OpRead, verbs.OpWrite, verbs.OpAtomicCmpAndSwp, verbs.OpAtomicFetchAndAdd} {
		wrs := p.wr(op, 8)
		if a := testing.AllocsPerRun(1000, func() { p.roundTrip(t, wrs, wc) }); a != 0 {
			t.Errorf("%v post+poll allocates %v times per op", op, a)
		}
	}
}
