package tcp_test

import (
	"context"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

type tpair struct {
	cq          verbs.CQ
	qp          verbs.QP
	local, peer verbs.MR
}

func newTCPPair(tb testing.TB) *tpair {
	tb.Helper()
	must := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}
	a, err := verbs.Open("tcp://127.0.0.1:0")
	must(err)
	b, err := verbs.Open("tcp://127.0.0.1:0")
	must(err)
	tb.Cleanup(func() { a.Close(); b.Close() })
	pa, _ := a.AllocPD()
	pb, _ := b.AllocPD()
	cqa, _ := a.CreateCQ(4096)
	cqb, _ := b.CreateCQ(64)
	qa, err := pa.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cqa, RecvCQ: cqa, Cap: verbs.QPCap{MaxSendWR: 4096}})
	must(err)
	qb, err := pb.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cqb, RecvCQ: cqb})
	must(err)
	must(verbs.ConnectRC(qa, verbs.AccessAll, b.Address(), qb.QPN()))
	must(verbs.ConnectRC(qb, verbs.AccessAll, a.Address(), qa.QPN()))
	la, _ := pa.AllocMR(1<<16, verbs.AccessAll)
	lb, _ := pb.AllocMR(1<<16, verbs.AccessAll)
	return &tpair{cq: cqa, qp: qa, local: la, peer: lb}
}

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
