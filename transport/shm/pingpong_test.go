package shm_test

import (
	"context"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// TestSendPingPongEveryPolicy echoes SENDs between two devices under each
// polling policy; every message and acknowledgement must get through
// whether the application polls or sleeps in CQ.Wait.
func TestSendPingPongEveryPolicy(t *testing.T) {
	for _, pol := range []struct {
		name string
		p    verbs.PollPolicy
	}{{"adaptive", verbs.PollAdaptive}, {"busy", verbs.PollBusy}, {"event", verbs.PollEvent}} {
		t.Run(pol.name, func(t *testing.T) {
			p := newPair(t, 4096)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			const n = 3000
			recv := func(qp verbs.QP, mr verbs.MR, k int) {
				wrs := make([]verbs.RecvWR, k)
				for i := range wrs {
					wrs[i] = verbs.RecvWR{ID: 7, SGL: []verbs.SGE{{Addr: mr.Addr() + 2048, Length: 64, LKey: mr.LKey()}}}
				}
				if err := qp.PostRecv(wrs); err != nil {
					t.Error(err)
				}
			}
			send := []verbs.SendWR{{ID: 9, Opcode: verbs.OpSend, Flags: verbs.FlagSignaled,
				SGL: []verbs.SGE{{Addr: p.local.Addr(), Length: 8, LKey: p.local.LKey()}}}}
			pong := []verbs.SendWR{{ID: 10, Opcode: verbs.OpSend, Flags: verbs.FlagSignaled,
				SGL: []verbs.SGE{{Addr: p.peer.Addr(), Length: 8, LKey: p.peer.LKey()}}}}
			recv(p.qp, p.local, 16)
			recv(p.peerQP, p.peer, 16)
			errc := make(chan error, 1)
			go func() {
				wc := make([]verbs.WC, 8)
				for got := 0; got < n; {
					k, err := verbs.PollWait(ctx, p.peerCQ, wc, pol.p)
					if err != nil {
						errc <- err
						return
					}
					for i := 0; i < k; i++ {
						if wc[i].Status != verbs.StatusSuccess {
							t.Errorf("server completion %+v", wc[i])
						}
						if wc[i].Opcode == verbs.WCRecv {
							got++
							recv(p.peerQP, p.peer, 1)
							if err := p.peerQP.PostSend(pong); err != nil {
								errc <- err
								return
							}
						}
					}
				}
				errc <- nil
			}()
			wc := make([]verbs.WC, 8)
			for i := 0; i < n; i++ {
				if err := p.qp.PostSend(send); err != nil {
					t.Fatalf("iteration %d: %v", i, err)
				}
				for sent, rcvd := false, false; !sent || !rcvd; {
					k, err := verbs.PollWait(ctx, p.cq, wc, pol.p)
					if err != nil {
						t.Fatalf("iteration %d: %v", i, err)
					}
					for j := 0; j < k; j++ {
						if wc[j].Status != verbs.StatusSuccess {
							t.Fatalf("iteration %d: %+v", i, wc[j])
						}
						if wc[j].Opcode == verbs.WCRecv {
							rcvd = true
							recv(p.qp, p.local, 1)
						} else {
							sent = true
						}
					}
				}
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
		})
	}
}
