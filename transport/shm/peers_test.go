package shm_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/transport/shm"
	"github.com/rdmakit/rdmakit/verbs"
)

// connectPair connects a's QP and a fresh QP of b (on b's CQ) to each
// other and returns b's QP.
func connectPair(t *testing.T, a, b *endpoint) verbs.QP {
	t.Helper()
	bq, err := b.pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: b.cq, RecvCQ: b.cq, Cap: verbs.QPCap{MaxRecvWR: 1024}})
	if err != nil {
		t.Fatal(err)
	}
	if err := verbs.ConnectRC(bq, verbs.AccessAll, a.dev.Address(), a.qp.QPN()); err != nil {
		t.Fatal(err)
	}
	if err := a.connect(b.dev.Address(), bq.QPN()); err != nil {
		t.Fatal(err)
	}
	return bq
}

// TestRevokeDuringTraffic deregisters a region while a peer hammers it
// with one-sided operations: operations posted after Deregister returned
// complete with REMOTE_ACCESS_ERR, nothing faults, and the peer unmaps the
// region.
func TestRevokeDuringTraffic(t *testing.T) {
	node := mustEndpoint(t, 4096)
	peer := mustEndpoint(t, 4096)
	connectPair(t, peer, node)
	victim, err := node.pd.AllocMR(1<<20, verbs.AccessAll)
	if err != nil {
		t.Fatal(err)
	}
	waitMapped(t, peer.dev, node.dev.Address(), victim.RKey())
	rkey, base := victim.RKey(), victim.Addr()

	var deregDone time.Time
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		time.Sleep(20 * time.Millisecond)
		if err := victim.Deregister(); err != nil {
			t.Error(err)
		}
		mu.Lock()
		deregDone = time.Now()
		mu.Unlock()
		close(done)
	}()
	ops := []verbs.Opcode{verbs.OpRead, verbs.OpWrite, verbs.OpAtomicFetchAndAdd}
	successes, i := 0, 0
	for {
		posted := time.Now()
		wc := peer.do(t, verbs.SendWR{Opcode: ops[i%len(ops)], SGL: peer.local(0, 8), RemoteAddr: base + uint64(i%4096)*8, RKey: rkey,
			Atomic: verbs.AtomicArgs{Swap: [4]uint64{1}}})
		i++
		if wc.Status == verbs.StatusSuccess {
			successes++
			mu.Lock()
			late := !deregDone.IsZero() && posted.After(deregDone)
			mu.Unlock()
			if late {
				t.Fatalf("operation %d posted after Deregister returned succeeded", i)
			}
			continue
		}
		if wc.Status != verbs.StatusRemAccessErr {
			t.Fatalf("operation %d on the revoked region: %v, want REMOTE_ACCESS_ERR", i, wc.Status)
		}
		break
	}
	<-done
	if successes == 0 {
		t.Fatal("no operation succeeded before the revocation")
	}
	if s := peer.qp.State(); s != verbs.StateError {
		t.Errorf("QP after REMOTE_ACCESS_ERR is %v, want ERROR", s)
	}
	for deadline := time.Now().Add(5 * time.Second); shm.Mapped(peer.dev, node.dev.Address(), rkey); {
		if time.Now().After(deadline) {
			t.Fatal("the peer still maps the revoked region")
		}
		time.Sleep(time.Millisecond)
	}
	// A new connection reaches new regions, never the old rkey.
	peer2 := mustEndpoint(t, 4096)
	connectPair(t, peer2, node)
	fresh, err := node.pd.AllocMR(4096, verbs.AccessAll)
	if err != nil {
		t.Fatal(err)
	}
	waitMapped(t, peer2.dev, node.dev.Address(), fresh.RKey())
	if wc := peer2.do(t, verbs.SendWR{Opcode: verbs.OpRead, SGL: peer2.local(0, 8), RemoteAddr: fresh.Addr(), RKey: fresh.RKey()}); wc.Status != verbs.StatusSuccess {
		t.Fatalf("READ of a fresh region: %v", wc.Status)
	}
	if wc := peer2.do(t, verbs.SendWR{Opcode: verbs.OpRead, SGL: peer2.local(0, 8), RemoteAddr: base, RKey: rkey}); wc.Status != verbs.StatusRemAccessErr {
		t.Fatalf("READ with the revoked rkey: %v, want REMOTE_ACCESS_ERR", wc.Status)
	}
}

// TestSixteenPeers has 16 peers, each on its own device, add to one
// counter of a node with FAA and stream SENDs into it at the same time:
// every addition and every message arrives.
func TestSixteenPeers(t *testing.T) {
	const peers, adds, sends = 16, 500, 50
	node := mustEndpoint(t, 1<<16)
	type conn struct {
		e  *endpoint
		nq verbs.QP
	}
	conns := make([]conn, peers)
	for i := range conns {
		e := mustEndpoint(t, 4096)
		nq := connectPair(t, e, node)
		recvs := make([]verbs.RecvWR, sends)
		for j := range recvs {
			recvs[j] = verbs.RecvWR{ID: uint64(i), SGL: node.local(uint64(1024+64*i), 64)}
		}
		if err := nq.PostRecv(recvs); err != nil {
			t.Fatal(err)
		}
		conns[i] = conn{e, nq}
	}
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		go func(e *endpoint) {
			defer wg.Done()
			for j := 0; j < adds; j++ {
				if wc := e.do(t, verbs.SendWR{Opcode: verbs.OpAtomicFetchAndAdd, SGL: e.local(0, 8), RemoteAddr: node.mr.Addr(), RKey: node.mr.RKey(),
					Atomic: verbs.AtomicArgs{Swap: [4]uint64{1}}}); wc.Status != verbs.StatusSuccess {
					t.Errorf("FAA: %v", wc.Status)
					return
				}
				if j%(adds/sends) == 0 {
					if wc := e.do(t, verbs.SendWR{Opcode: verbs.OpSend, SGL: e.local(8, 16)}); wc.Status != verbs.StatusSuccess {
						t.Errorf("SEND: %v", wc.Status)
						return
					}
				}
			}
		}(conns[i].e)
	}
	got := make([]int, peers)
	total := 0
	wc := make([]verbs.WC, 64)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for total < peers*sends {
		n, err := verbs.PollWait(ctx, node.cq, wc, verbs.PollAdaptive)
		if err != nil {
			t.Fatalf("after %d receives: %v", total, err)
		}
		for i := 0; i < n; i++ {
			if wc[i].Status != verbs.StatusSuccess || wc[i].Opcode != verbs.WCRecv {
				t.Fatalf("node completion %+v", wc[i])
			}
			got[wc[i].ID]++
			total++
		}
	}
	wg.Wait()
	if v := node.word(0); v != peers*adds {
		t.Errorf("counter = %d, want %d", v, peers*adds)
	}
	for i, n := range got {
		if n != sends {
			t.Errorf("peer %d: %d messages arrived, want %d", i, n, sends)
		}
	}
}

// TestPeerThatNeverPolls has a peer overrun its own CQ — one-sided
// operations and acknowledged SENDs pile up in it — while another peer of
// the same node goes on normally: the overrun is the lazy peer's error
// only.
func TestPeerThatNeverPolls(t *testing.T) {
	node := mustEndpoint(t, 1<<16)
	lazyDev, err := verbs.Open("shm://" + uniqueName("lazy"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lazyDev.Close() })
	lpd, _ := lazyDev.AllocPD()
	lcq, err := lazyDev.CreateCQ(8)
	if err != nil {
		t.Fatal(err)
	}
	lqp, err := lpd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: lcq, RecvCQ: lcq, Cap: verbs.QPCap{MaxSendWR: 256}})
	if err != nil {
		t.Fatal(err)
	}
	lmr, _ := lpd.AllocMR(4096, verbs.AccessAll)
	lazy := &endpoint{dev: lazyDev, pd: lpd, cq: lcq, qp: lqp, mr: lmr}
	nq := connectPair(t, lazy, node)
	recvs := make([]verbs.RecvWR, 64)
	for i := range recvs {
		recvs[i] = verbs.RecvWR{ID: 1, SGL: node.local(2048, 64)}
	}
	if err := nq.PostRecv(recvs); err != nil {
		t.Fatal(err)
	}
	wrs := make([]verbs.SendWR, 32)
	for i := range wrs {
		wrs[i] = verbs.SendWR{Opcode: verbs.OpSend, Flags: verbs.FlagSignaled, SGL: lazy.local(0, 8)}
		if i%2 == 1 {
			wrs[i] = verbs.SendWR{Opcode: verbs.OpRead, Flags: verbs.FlagSignaled, SGL: lazy.local(0, 8), RemoteAddr: node.mr.Addr(), RKey: node.mr.RKey()}
		}
	}
	if err := lqp.PostSend(wrs); err != nil {
		t.Fatal(err)
	}
	// The lazy peer's QP ends in ERROR once its CQ overflows (without any
	// poll: its device's NIC goroutine takes the acknowledgements).
	for deadline := time.Now().Add(10 * time.Second); lqp.State() != verbs.StateError; {
		if time.Now().After(deadline) {
			t.Fatalf("lazy QP is %v; its CQ holds %d", lqp.State(), lcq.Depth())
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := lcq.Poll(make([]verbs.WC, 64)); err == nil {
		t.Error("the lazy CQ reports no overrun")
	}
	// The node and its other peers are unaffected.
	other := mustEndpoint(t, 4096)
	oq := connectPair(t, other, node)
	if err := oq.PostRecv([]verbs.RecvWR{{ID: 2, SGL: node.local(4096, 64)}}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		if wc := other.do(t, verbs.SendWR{Opcode: verbs.OpRead, SGL: other.local(0, 8), RemoteAddr: node.mr.Addr(), RKey: node.mr.RKey()}); wc.Status != verbs.StatusSuccess {
			t.Fatalf("READ by a well-behaved peer: %v", wc.Status)
		}
	}
	if wc := other.do(t, verbs.SendWR{Opcode: verbs.OpSend, SGL: other.local(0, 8)}); wc.Status != verbs.StatusSuccess {
		t.Fatalf("SEND by a well-behaved peer: %v", wc.Status)
	}
	wc := make([]verbs.WC, 128)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for seen := false; !seen; {
		n, err := verbs.PollWait(ctx, node.cq, wc, verbs.PollAdaptive)
		if err != nil {
			t.Fatalf("node CQ: %v", err)
		}
		for i := 0; i < n; i++ {
			if wc[i].Status != verbs.StatusSuccess {
				t.Fatalf("node completion %+v", wc[i])
			}
			seen = seen || wc[i].ID == 2
		}
	}
}
