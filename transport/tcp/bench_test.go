package tcp_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

type tpair struct {
	cq          verbs.CQ
	qp          verbs.QP
	local, peer verbs.MR
}

// newTCPPair connects two tcp devices of this process with a deep send
// queue.
func newTCPPair(tb testing.TB) *tpair { return newTCPPairDepth(tb, 4096) }

func (p *tpair) reads(n int) []verbs.SendWR {
	wrs := make([]verbs.SendWR, n)
	for i := range wrs {
		wrs[i] = verbs.SendWR{ID: uint64(i), Opcode: verbs.OpRead,
			SGL:        []verbs.SGE{{Addr: p.local.Addr() + uint64(8*i), Length: 8, LKey: p.local.LKey()}},
			RemoteAddr: p.peer.Addr() + uint64(8*i), RKey: p.peer.RKey()}
	}
	wrs[n-1].Flags = verbs.FlagSignaled
	return wrs
}

func benchReads(b *testing.B, list int, pol verbs.PollPolicy) {
	p := newTCPPair(b)
	wrs := p.reads(list)
	wc := make([]verbs.WC, 16)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := p.qp.PostSend(wrs); err != nil {
			b.Fatal(err)
		}
		n, err := verbs.PollWait(ctx, p.cq, wc, pol)
		if err != nil || n != 1 || wc[0].Status != verbs.StatusSuccess {
			b.Fatalf("n=%d err=%v %+v", n, err, wc[0])
		}
	}
	b.ReportMetric(float64(b.N*list)/b.Elapsed().Seconds()/1e6, "Mops")
}

func BenchmarkRead8List1(b *testing.B)      { benchReads(b, 1, verbs.PollAdaptive) }
func BenchmarkRead8List1Busy(b *testing.B)  { benchReads(b, 1, verbs.PollBusy) }
func BenchmarkRead8List64(b *testing.B)     { benchReads(b, 64, verbs.PollAdaptive) }
func BenchmarkRead8List64Busy(b *testing.B) { benchReads(b, 64, verbs.PollBusy) }

// echoPair is two tcp devices of this process, connected RC QPs, and a
// service on the second that sends every message it receives back, as
// `rdmakit node --echo` does.
type echoPair struct {
	cq    verbs.CQ
	qp    verbs.QP
	send  []verbs.SendWR
	recv  []verbs.RecvWR
	local verbs.MR
}

// newEchoPair connects two tcp devices and starts the echo service; it
// stops with the test.
func newEchoPair(tb testing.TB, query string) *echoPair {
	tb.Helper()
	must := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}
	a, err := verbs.Open("tcp://127.0.0.1:0" + query)
	must(err)
	b, err := verbs.Open("tcp://127.0.0.1:0" + query)
	must(err)
	pa, _ := a.AllocPD()
	pb, _ := b.AllocPD()
	cqa, _ := a.CreateCQ(256)
	cqb, _ := b.CreateCQ(256)
	qa, err := pa.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cqa, RecvCQ: cqa, Cap: verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64}})
	must(err)
	qb, err := pb.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cqb, RecvCQ: cqb, Cap: verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64}})
	must(err)
	// As the connection manager does: the listener's QP first.
	must(verbs.ConnectRC(qb, verbs.AccessAll, a.Address(), qa.QPN()))
	must(verbs.ConnectRC(qa, verbs.AccessAll, b.Address(), qb.QPN()))
	la, _ := pa.AllocMR(4096, verbs.AccessAll)
	lb, _ := pb.AllocMR(4096, verbs.AccessAll)
	p := &echoPair{cq: cqa, qp: qa, local: la}
	p.send = []verbs.SendWR{{ID: 1, Opcode: verbs.OpSend, Flags: verbs.FlagSignaled,
		SGL: []verbs.SGE{{Addr: la.Addr(), Length: 8, LKey: la.LKey()}}}}
	p.recv = []verbs.RecvWR{{ID: 2, SGL: []verbs.SGE{{Addr: la.Addr() + 64, Length: 64, LKey: la.LKey()}}}}
	for range 16 {
		must(qa.PostRecv(p.recv))
	}
	brecv := []verbs.RecvWR{{ID: 0, SGL: []verbs.SGE{{Addr: lb.Addr(), Length: 64, LKey: lb.LKey()}}}}
	for range 16 {
		must(qb.PostRecv(brecv))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { // the echo service
		defer close(done)
		wc := make([]verbs.WC, 16)
		echo := []verbs.SendWR{{ID: 3, Opcode: verbs.OpSend, Flags: verbs.FlagSignaled,
			SGL: []verbs.SGE{{Addr: lb.Addr(), Length: 8, LKey: lb.LKey()}}}}
		owed := 0 // echoes not yet posted: the send queue was full
		for {
			n, err := verbs.PollWait(ctx, cqb, wc, verbs.PollAdaptive)
			if err != nil {
				return
			}
			for i := range n {
				switch {
				case wc[i].Status != verbs.StatusSuccess:
					return
				case wc[i].Opcode == verbs.WCRecv:
					if qb.PostRecv(brecv) != nil {
						return
					}
					owed++
				}
			}
			for ; owed > 0; owed-- {
				if err := qb.PostSend(echo); errors.Is(err, verbs.ErrQueueFull) {
					break // the completions of earlier echoes free the queue
				} else if err != nil {
					return
				}
			}
		}
	}()
	tb.Cleanup(func() {
		cancel()
		<-done
		a.Close()
		b.Close()
	})
	return p
}

// roundTrip sends one message and waits for its completion and its echo.
func (p *echoPair) roundTrip(ctx context.Context, wc []verbs.WC, pol verbs.PollPolicy) error {
	if err := p.qp.PostSend(p.send); err != nil {
		return err
	}
	for sent, echoed := false, false; !sent || !echoed; {
		n, err := verbs.PollWait(ctx, p.cq, wc, pol)
		if err != nil {
			return err
		}
		for i := range n {
			if wc[i].Status != verbs.StatusSuccess {
				return wc[i].Err()
			}
			if wc[i].Opcode == verbs.WCRecv {
				echoed = true
				if err := p.qp.PostRecv(p.recv); err != nil {
					return err
				}
			} else {
				sent = true
			}
		}
	}
	return nil
}

// BenchmarkSendEcho8 is the echoed SEND round trip that
// BenchmarkRead8List1 is the READ round trip of: one 8 B message at a
// time, posted, completed and echoed back by a service on the peer.
func BenchmarkSendEcho8(b *testing.B) { benchSendEcho(b, "") }

func benchSendEcho(b *testing.B, query string) {
	p := newEchoPair(b, query)
	wc := make([]verbs.WC, 16)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := p.roundTrip(ctx, wc, verbs.PollAdaptive); err != nil {
			b.Fatal(err)
		}
	}
}
