package shm_test

import (
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/transport/shm"
	"github.com/rdmakit/rdmakit/verbs"
)

// pair is two connected RC QPs on two shm devices of this process, with a
// region on each side; the peer's region is mapped by the initiator.
type pair struct {
	cq           verbs.CQ
	qp           verbs.QP
	local, peer  verbs.MR
	dev, peerDev verbs.Device
	pd, peerPD   verbs.PD
	peerCQ       verbs.CQ
	peerQP       verbs.QP
}

func newPair(tb testing.TB, size int) *pair { return newPairWith(tb, size, false) }

// newPairWith is newPair; single makes the initiator's QP and send CQ
// SingleThreaded, its receives completing on a CQ of their own.
func newPairWith(tb testing.TB, size int, single bool) *pair {
	tb.Helper()
	must := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}
	a, err := verbs.Open("shm://" + uniqueName("pa"))
	must(err)
	b, err := verbs.Open("shm://" + uniqueName("pb"))
	must(err)
	tb.Cleanup(func() { a.Close(); b.Close() })
	pa, err := a.AllocPD()
	must(err)
	pb, err := b.AllocPD()
	must(err)
	cqa, err := verbs.CreateCQEx(a, verbs.CQInitAttr{Depth: 1024, SingleThreaded: single})
	must(err)
	rcqa := cqa
	if single {
		rcqa, err = a.CreateCQ(1024)
		must(err)
	}
	cqb, err := b.CreateCQ(1024)
	must(err)
	qa, err := pa.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cqa, RecvCQ: rcqa, SingleThreaded: single})
	must(err)
	qb, err := pb.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cqb, RecvCQ: cqb})
	must(err)
	must(verbs.ConnectRC(qa, verbs.AccessAll, b.Address(), qb.QPN()))
	must(verbs.ConnectRC(qb, verbs.AccessAll, a.Address(), qa.QPN()))
	la, err := pa.AllocMR(size, verbs.AccessAll)
	must(err)
	lb, err := pb.AllocMR(size, verbs.AccessAll)
	must(err)
	p := &pair{cq: cqa, qp: qa, local: la, peer: lb, dev: a, peerDev: b, pd: pa, peerPD: pb, peerCQ: cqb, peerQP: qb}
	waitMapped(tb, a, b.Address(), lb.RKey())
	return p
}

// waitMapped waits until dev maps the peer's region rkey.
func waitMapped(tb testing.TB, dev verbs.Device, peer string, rkey uint32) {
	tb.Helper()
	for deadline := time.Now().Add(5 * time.Second); !shm.Mapped(dev, peer, rkey); {
		if time.Now().After(deadline) {
			tb.Fatalf("region %#x of %s never mapped", rkey, peer)
		}
		time.Sleep(time.Millisecond)
	}
}

func (p *pair) wr(op verbs.Opcode, n uint32) []verbs.SendWR {
	return []verbs.SendWR{{
		ID: 1, Opcode: op, Flags: verbs.FlagSignaled,
		SGL:        []verbs.SGE{{Addr: p.local.Addr(), Length: n, LKey: p.local.LKey()}},
		RemoteAddr: p.peer.Addr(), RKey: p.peer.RKey(),
	}}
}

func (p *pair) roundTrip(tb testing.TB, wrs []verbs.SendWR, wc []verbs.WC) {
	if err := p.qp.PostSend(wrs); err != nil {
		tb.Fatal(err)
	}
	for {
		n, err := p.cq.Poll(wc)
		if err != nil {
			tb.Fatal(err)
		}
		if n == 1 {
			if wc[0].Status != verbs.StatusSuccess {
				tb.Fatalf("status %v", wc[0].Status)
			}
			return
		}
	}
}

func benchOp(b *testing.B, op verbs.Opcode, n uint32) {
	b.Run("locked", func(b *testing.B) { benchOpWith(b, op, n, false) })
	b.Run("single", func(b *testing.B) { benchOpWith(b, op, n, true) })
}

func benchOpWith(b *testing.B, op verbs.Opcode, n uint32, single bool) {
	p := newPairWith(b, 4<<20, single)
	wrs, wc := p.wr(op, n), make([]verbs.WC, 4)
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		p.roundTrip(b, wrs, wc)
	}
}

func BenchmarkRead8(b *testing.B)     { benchOp(b, verbs.OpRead, 8) }
func BenchmarkWrite8(b *testing.B)    { benchOp(b, verbs.OpWrite, 8) }
func BenchmarkCAS8(b *testing.B)      { benchOp(b, verbs.OpAtomicCmpAndSwp, 8) }
func BenchmarkWrite1MiB(b *testing.B) { benchOp(b, verbs.OpWrite, 1<<20) }

func TestHotPathAllocatesNothing(t *testing.T) {
	for _, single := range []bool{false, true} {
		p := newPairWith(t, 4096, single)
		wc := make([]verbs.WC, 4)
		for _, op := range []verbs.Opcode{verbs.OpRead, verbs.OpWrite, verbs.OpAtomicCmpAndSwp, verbs.OpAtomicFetchAndAdd} {
			wrs := p.wr(op, 8)
			if a := testing.AllocsPerRun(1000, func() { p.roundTrip(t, wrs, wc) }); a != 0 {
				t.Errorf("%v post+poll (single-threaded %v) allocates %v times per op", op, single, a)
			}
		}
	}
}

// BenchmarkSendPingPong measures an echoed 8-byte SEND between two
// devices, each side busy-polling on its own goroutine; ns/op is one round
// trip.
func BenchmarkSendPingPong(b *testing.B) {
	p := newPair(b, 4096)
	post := func(qp verbs.QP, mr verbs.MR, k int) {
		wrs := make([]verbs.RecvWR, k)
		for i := range wrs {
			wrs[i] = verbs.RecvWR{ID: 7, SGL: []verbs.SGE{{Addr: mr.Addr() + 2048, Length: 64, LKey: mr.LKey()}}}
		}
		if err := qp.PostRecv(wrs); err != nil {
			b.Fatal(err)
		}
	}
	post(p.qp, p.local, 64)
	post(p.peerQP, p.peer, 64)
	ping := []verbs.SendWR{{ID: 9, Opcode: verbs.OpSend, Flags: verbs.FlagSignaled, SGL: []verbs.SGE{{Addr: p.local.Addr(), Length: 8, LKey: p.local.LKey()}}}}
	pong := []verbs.SendWR{{ID: 10, Opcode: verbs.OpSend, Flags: verbs.FlagSignaled, SGL: []verbs.SGE{{Addr: p.peer.Addr(), Length: 8, LKey: p.peer.LKey()}}}}
	recvOne := []verbs.RecvWR{{ID: 7, SGL: []verbs.SGE{{Addr: p.local.Addr() + 2048, Length: 64, LKey: p.local.LKey()}}}}
	recvOneP := []verbs.RecvWR{{ID: 7, SGL: []verbs.SGE{{Addr: p.peer.Addr() + 2048, Length: 64, LKey: p.peer.LKey()}}}}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		wc := make([]verbs.WC, 16)
		for {
			select {
			case <-stop:
				return
			default:
			}
			n, _ := p.peerCQ.Poll(wc)
			for i := 0; i < n; i++ {
				if wc[i].Opcode == verbs.WCRecv {
					_ = p.peerQP.PostRecv(recvOneP)
					_ = p.peerQP.PostSend(pong)
				}
			}
		}
	}()
	wc := make([]verbs.WC, 16)
	b.ResetTimer()
	for b.Loop() {
		if err := p.qp.PostSend(ping); err != nil {
			b.Fatal(err)
		}
		for sent, got := false, false; !sent || !got; {
			n, _ := p.cq.Poll(wc)
			for i := 0; i < n; i++ {
				if wc[i].Opcode == verbs.WCRecv {
					got = true
					_ = p.qp.PostRecv(recvOne)
				} else {
					sent = true
				}
			}
		}
	}
	b.StopTimer()
	close(stop)
	<-done
}
