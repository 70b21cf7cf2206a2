package shm_test

import (
	"testing"

	"github.com/rdmakit/rdmakit/verbs"
)

// BenchmarkSendOneGoroutine measures the work of an 8-byte SEND end to
// end on one goroutine: post, the sender's completion, the receiver's
// poll that yields the receive completion, the re-posted receive. With
// both ends on one goroutine no scheduling is measured, so on a loaded
// machine it shows the CPU cost where BenchmarkSendPingPong shows mostly
// the scheduler.
func BenchmarkSendOneGoroutine(b *testing.B) {
	p := newPair(b, 4096)
	recv := []verbs.RecvWR{{ID: 7, SGL: []verbs.SGE{{Addr: p.peer.Addr() + 2048, Length: 64, LKey: p.peer.LKey()}}}}
	send := []verbs.SendWR{{ID: 9, Opcode: verbs.OpSend, Flags: verbs.FlagSignaled, SGL: []verbs.SGE{{Addr: p.local.Addr(), Length: 8, LKey: p.local.LKey()}}}}
	wc := make([]verbs.WC, 4)
	b.ReportAllocs()
	for b.Loop() {
		if err := p.peerQP.PostRecv(recv); err != nil {
			b.Fatal(err)
		}
		if err := p.qp.PostSend(send); err != nil {
			b.Fatal(err)
		}
		for sent, got := false, false; !sent || !got; {
			if !got {
				if n, _ := p.peerCQ.Poll(wc); n == 1 {
					got = true
				}
			}
			if !sent {
				if n, _ := p.cq.Poll(wc); n == 1 {
					sent = true
				}
			}
		}
	}
}
