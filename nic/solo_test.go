package nic_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rdmakit/rdmakit/transport/loop"
	"github.com/rdmakit/rdmakit/verbs"
)

var soloSeq atomic.Int64

// soloPair is an RC QP whose send and receive CQ (depth) is its alone,
// connected to a QP on a second loop device, with a region on each side.
type soloPair struct {
	pd         verbs.PD
	cq         verbs.CQ
	qp         verbs.QP
	peerPD     verbs.PD
	local, mem verbs.MR
	dev, peer  verbs.Device
}

func newSoloPair(t *testing.T, depth int) *soloPair {
	t.Helper()
	f := loop.Get(fmt.Sprintf("solo%d", soloSeq.Add(1)))
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
	p.cq, err = a.CreateCQ(depth)
	must(t, err)
	p.qp = p.connect(t, p.cq)
	p.local, err = p.pd.AllocMR(4096, verbs.AccessAll)
	must(t, err)
	p.mem, err = p.peerPD.AllocMR(4096, verbs.AccessAll)
	must(t, err)
	return p
}

// connect creates a QP on cq connected to a fresh QP of the peer.
func (p *soloPair) connect(t *testing.T, cq verbs.CQ) verbs.QP {
	t.Helper()
	pcq, err := p.peer.CreateCQ(16)
	must(t, err)
	q, err := p.pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq})
	must(t, err)
	pq, err := p.peerPD.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: pcq, RecvCQ: pcq})
	must(t, err)
	must(t, verbs.ConnectRC(q, verbs.AccessAll, p.peer.Address(), pq.QPN()))
	must(t, verbs.ConnectRC(pq, verbs.AccessAll, p.dev.Address(), q.QPN()))
	return q
}

func (p *soloPair) read(q verbs.QP, id uint64) error {
	return q.PostSend([]verbs.SendWR{{ID: id, Opcode: verbs.OpRead, Flags: verbs.FlagSignaled,
		SGL:        []verbs.SGE{{Addr: p.local.Addr(), Length: 8, LKey: p.local.LKey()}},
		RemoteAddr: p.mem.Addr(), RKey: p.mem.RKey()}})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestSoloCQDepthIsExact: a CQ one QP has alone (its completions are
// written without the CQ lock, the polled head seen lazily) holds exactly
// its depth: the completion after that overruns it, whatever was polled
// in between.
func TestSoloCQDepthIsExact(t *testing.T) {
	const depth = 16
	p := newSoloPair(t, depth)
	wc := make([]verbs.WC, depth)
	for i := range depth {
		must(t, p.read(p.qp, uint64(i)))
	}
	if n, err := p.cq.Poll(wc[:3]); n != 3 || err != nil {
		t.Fatalf("poll: %d, %v", n, err)
	}
	for i := range 3 { // room for exactly these, though the head was not published yet
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

// TestSoloCQEndsSafely: while a QP posts and polls on a CQ it has alone,
// another QP attaches to the CQ and the first posts a receive, which both
// end the mode; every completion arrives once, in order per QP (run with
// -race).
func TestSoloCQEndsSafely(t *testing.T) {
	const per = 2000
	p := newSoloPair(t, 64)
	var got [2]atomic.Int64
	var next [2]uint64
	var bad atomic.Value
	poll := func(q int) {
		wc := make([]verbs.WC, 8)
		n, err := p.cq.Poll(wc)
		if err != nil {
			bad.Store(err)
		}
		for _, c := range wc[:n] {
			if c.Status != verbs.StatusSuccess {
				bad.Store(fmt.Errorf("id %#x: %v", c.ID, c.Status))
				continue
			}
			qi := int(c.ID >> 32)
			if c.ID&0xffffffff != next[qi] {
				bad.Store(fmt.Errorf("QP %d: id %d after %d", qi, c.ID&0xffffffff, next[qi]-1))
			}
			next[qi]++
			got[qi].Add(1)
		}
	}
	var mu sync.Mutex // the CQ's one poller at a time keeps next consistent
	run := func(qi int, q verbs.QP) {
		for i := uint64(0); i < per; i++ {
			for {
				err := p.read(q, uint64(qi)<<32|i)
				if err == nil {
					break
				}
				if !errors.Is(err, verbs.ErrQueueFull) {
					bad.Store(err)
					return
				}
				mu.Lock()
				poll(qi)
				mu.Unlock()
			}
			if i%4 == 0 {
				mu.Lock()
				poll(qi)
				mu.Unlock()
			}
		}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); run(0, p.qp) }()
	second := p.connect(t, p.cq)
	wg.Add(1)
	go func() { defer wg.Done(); run(1, second) }()
	must(t, p.qp.PostRecv([]verbs.RecvWR{{ID: 7, SGL: []verbs.SGE{{Addr: p.local.Addr() + 64, Length: 8, LKey: p.local.LKey()}}}}))
	wg.Wait()
	for got[0].Load()+got[1].Load() < 2*per {
		if e := bad.Load(); e != nil {
			break
		}
		mu.Lock()
		poll(0)
		mu.Unlock()
	}
	if e := bad.Load(); e != nil {
		t.Fatal(e)
	}
	if got[0].Load() != per || got[1].Load() != per {
		t.Fatalf("completions %d and %d, want %d each", got[0].Load(), got[1].Load(), per)
	}
}
