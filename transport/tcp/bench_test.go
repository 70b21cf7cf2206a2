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
