package nic_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/transport/loop"
	"github.com/rdmakit/rdmakit/verbs"
)

// newSinglePair is newSoloPair with a SingleThreaded QP and send CQ, and
// a receive CQ of its own on which the QP has a receive posted: the send
// CQ stays the QP's alone and is polled without a lock.
func newSinglePair(t *testing.T, depth int) *soloPair {
	t.Helper()
	f := loop.Get(fmt.Sprintf("single%d", soloSeq.Add(1)))
	a, err := f.Open("a")
	must(t, err)
	b, err := f.Open("b")
	must(t, err)
	t.Cleanup(func() { a.Close(); b.Close() })
	p := &soloPair{dev: a, peer: b}
	p.pd, err = a.AllocPD()
	must(t, err)
	p.peerPD, err = b.AllocPD()
	must(t, err)
	p.cq, err = verbs.CreateCQEx(a, verbs.CQInitAttr{Depth: depth, SingleThreaded: true})
	must(t, err)
	rcq, err := a.CreateCQ(16)
	must(t, err)
	pcq, err := b.CreateCQ(16)
	must(t, err)
	p.qp, err = p.pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: p.cq, RecvCQ: rcq, SingleThreaded: true})
	must(t, err)
	pq, err := p.peerPD.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: pcq, RecvCQ: pcq})
	must(t, err)
	must(t, verbs.ConnectRC(p.qp, verbs.AccessAll, b.Address(), pq.QPN()))
	must(t, verbs.ConnectRC(pq, verbs.AccessAll, a.Address(), p.qp.QPN()))
	p.local, err = p.pd.AllocMR(4096, verbs.AccessAll)
	must(t, err)
	p.mem, err = p.peerPD.AllocMR(4096, verbs.AccessAll)
	must(t, err)
	must(t, p.qp.PostRecv([]verbs.RecvWR{{ID: 7, SGL: []verbs.SGE{{Addr: p.local.Addr() + 64, Length: 8, LKey: p.local.LKey()}}}}))
	return p
}

// TestSingleThreadedCQDepthIsExact: a SingleThreaded CQ polled without a
// lock holds exactly its depth, as a locked one.
func TestSingleThreadedCQDepthIsExact(t *testing.T) {
	const depth = 16
	p := newSinglePair(t, depth)
	wc := make([]verbs.WC, depth)
	for i := range depth {
		must(t, p.read(p.qp, uint64(i)))
	}
	if n, err := p.cq.Poll(wc[:3]); n != 3 || err != nil {
		t.Fatalf("poll: %d, %v", n, err)
	}
	for i := range 3 {
		must(t, p.read(p.qp, uint64(depth+i)))
	}
	if n := p.cq.(interface{ Len() int }).Len(); n != depth {
		t.Fatalf("%d completions queued, want %d", n, depth)
	}
	must(t, p.read(p.qp, 99)) // one too many: lost, the CQ overruns
	n, err := p.cq.Poll(wc)
	if n != depth || !errors.Is(err, verbs.ErrCQOverrun) {
		t.Fatalf("poll after overrun: %d, %v; want %d, ErrCQOverrun", n, err, depth)
	}
	for i := range n {
		if want := uint64(3 + i); wc[i].ID != want || wc[i].Status != verbs.StatusSuccess {
			t.Fatalf("completion %d: id %d %v, want id %d SUCCESS", i, wc[i].ID, wc[i].Status, want)
		}
	}
	if s := p.qp.State(); s != verbs.StateError {
		t.Fatalf("QP in %v after losing a completion, want ERROR", s)
	}
}

// TestSingleThreadedQPStaysCorrect: the promise broken — two goroutines
// post to one SingleThreaded QP while a third takes its lock the other
// way (Outstanding) — every request completes exactly once, in order per
// poster (run with -race: the biased lock must order them).
func TestSingleThreadedQPStaysCorrect(t *testing.T) {
	const per = 3000
	p := newSinglePair(t, 64)
	var mu sync.Mutex // the CQ's one poller at a time
	var next [2]uint64
	var total atomic.Int64
	var bad atomic.Value
	poll := func() {
		mu.Lock()
		defer mu.Unlock()
		var wc [8]verbs.WC
		n, err := p.cq.Poll(wc[:])
		if err != nil {
			bad.Store(err)
		}
		for _, c := range wc[:n] {
			pi := int(c.ID >> 32)
			if c.Status != verbs.StatusSuccess || pi > 1 || c.ID&0xffffffff != next[pi] {
				bad.Store(fmt.Errorf("completion id %#x %v, want poster %d's %d", c.ID, c.Status, pi, next[pi%2]))
				continue
			}
			next[pi]++
			total.Add(1)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for pi := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := uint64(0); i < per && bad.Load() == nil; {
				err := p.read(p.qp, uint64(pi)<<32|i)
				switch {
				case err == nil:
					i++
				case !errors.Is(err, verbs.ErrQueueFull):
					bad.Store(err)
					return
				}
				poll()
			}
		}()
	}
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				_ = p.qp.(interface{ Outstanding() int }).Outstanding()
			}
		}
	}()
	wg.Wait()
	for total.Load() < 2*per && bad.Load() == nil {
		poll()
	}
	close(stop)
	if e := bad.Load(); e != nil {
		t.Fatal(e)
	}
}

// TestSingleThreadedHotPathAllocatesNothing: post and poll on a
// SingleThreaded QP and CQ allocate nothing.
func TestSingleThreadedHotPathAllocatesNothing(t *testing.T) {
	p := newSinglePair(t, 64)
	wc := make([]verbs.WC, 4)
	wrs := []verbs.SendWR{{ID: 1, Opcode: verbs.OpRead, Flags: verbs.FlagSignaled,
		SGL:        []verbs.SGE{{Addr: p.local.Addr(), Length: 8, LKey: p.local.LKey()}},
		RemoteAddr: p.mem.Addr(), RKey: p.mem.RKey()}}
	if a := testing.AllocsPerRun(1000, func() {
		if err := p.qp.PostSend(wrs); err != nil {
			t.Fatal(err)
		}
		for n := 0; n == 0; {
			n, _ = p.cq.Poll(wc)
		}
	}); a != 0 {
		t.Errorf("post+poll allocates %v times per op", a)
	}
}

// TestSingleThreadedCQEventWakeups: a poller that arms and parks
// (PollEvent) on a single-threaded CQ, whose QP publishes completions
// with a plain store, is woken for every completion: each READ is posted
// while the poller is arming, polling or parked, and none is missed.
func TestSingleThreadedCQEventWakeups(t *testing.T) {
	const n = 3000
	p := newSinglePair(t, 64)
	wrs := []verbs.SendWR{{ID: 1, Opcode: verbs.OpRead, Flags: verbs.FlagSignaled,
		SGL:        []verbs.SGE{{Addr: p.local.Addr(), Length: 8, LKey: p.local.LKey()}},
		RemoteAddr: p.mem.Addr(), RKey: p.mem.RKey()}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seen := make(chan error, 1)
	go func() {
		wc := make([]verbs.WC, 4)
		for got := 0; got < n; {
			k, err := verbs.PollWait(ctx, p.cq, wc, verbs.PollEvent)
			if err != nil {
				seen <- err
				return
			}
			for range k {
				got++
				seen <- nil
			}
		}
	}()
	for i := range n {
		must(t, p.qp.PostSend(wrs))
		if err := <-seen; err != nil {
			t.Fatalf("completion %d never woke the poller: %v", i, err)
		}
	}
}
