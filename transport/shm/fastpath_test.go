package shm_test

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/transport/shm"
	"github.com/rdmakit/rdmakit/verbs"
)

// The direct fast path caches, per QP, the last local region and the
// last remote region it resolved (nic/requester_fast.go). These tests
// change what a cache vouches for between two requests and check that
// the second request sees the change, on a locked and a SingleThreaded
// QP alike.

// once posts wrs and returns the one completion.
func (p *pair) once(tb testing.TB, wrs []verbs.SendWR) verbs.WC {
	tb.Helper()
	if err := p.qp.PostSend(wrs); err != nil {
		tb.Fatal(err)
	}
	wc := make([]verbs.WC, 1)
	for deadline := time.Now().Add(10 * time.Second); ; {
		n, err := p.cq.Poll(wc)
		if err != nil {
			tb.Fatal(err)
		}
		if n == 1 {
			return wc[0]
		}
		if time.Now().After(deadline) {
			tb.Fatal("no completion")
		}
	}
}

// expect posts wrs and fails the test unless it completes with st.
func (p *pair) expect(tb testing.TB, what string, wrs []verbs.SendWR, st verbs.Status) {
	tb.Helper()
	if wc := p.once(tb, wrs); wc.Status != st {
		tb.Fatalf("%s: status %v, want %v", what, wc.Status, st)
	}
}

func forBoth(t *testing.T, f func(t *testing.T, p *pair)) {
	for _, single := range []bool{false, true} {
		name := "locked"
		if single {
			name = "single"
		}
		t.Run(name, func(t *testing.T) { f(t, newPairWith(t, 4096, single)) })
	}
}

// TestFastPathSeesRemoteDeregistration: a READ after the peer deregisters
// the region it read before fails with REM_ACCESS_ERR, before and after
// the initiator unmaps the region; a region registered afterwards is read.
func TestFastPathSeesRemoteDeregistration(t *testing.T) {
	for _, op := range []verbs.Opcode{verbs.OpRead, verbs.OpWrite, verbs.OpAtomicCmpAndSwp, verbs.OpAtomicFetchAndAdd} {
		forBoth(t, func(t *testing.T, p *pair) {
			p.expect(t, op.String()+" before", p.wr(op, 8), verbs.StatusSuccess)
			if err := p.peer.Deregister(); err != nil {
				t.Fatal(err)
			}
			p.expect(t, op.String()+" after deregistration", p.wr(op, 8), verbs.StatusRemAccessErr)
		})
	}
	forBoth(t, func(t *testing.T, p *pair) {
		p.expect(t, "READ", p.wr(verbs.OpRead, 8), verbs.StatusSuccess)
		rkey := p.peer.RKey()
		if err := p.peer.Deregister(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); shm.Mapped(p.dev, p.peerDev.Address(), rkey); {
			if time.Now().After(deadline) {
				t.Fatal("the deregistered region stays mapped")
			}
			time.Sleep(time.Millisecond)
		}
		p.expect(t, "READ after unmapping", p.wr(verbs.OpRead, 8), verbs.StatusRemAccessErr)
	})
	forBoth(t, func(t *testing.T, p *pair) {
		p.expect(t, "READ", p.wr(verbs.OpRead, 8), verbs.StatusSuccess)
		if err := p.peer.Deregister(); err != nil {
			t.Fatal(err)
		}
		mr, err := p.peerPD.AllocMR(4096, verbs.AccessAll)
		if err != nil {
			t.Fatal(err)
		}
		binary.NativeEndian.PutUint64(mr.Bytes(), 0x1122334455667788)
		waitMapped(t, p.dev, p.peerDev.Address(), mr.RKey())
		p.peer = mr
		p.expect(t, "READ of the new region", p.wr(verbs.OpRead, 8), verbs.StatusSuccess)
		if got := binary.NativeEndian.Uint64(p.local.Bytes()); got != 0x1122334455667788 {
			t.Fatalf("READ of the new region got %#x", got)
		}
	})
}

// TestFastPathSeesLocalDeregistration: a READ into a local region that
// was deregistered after an earlier READ into it fails with
// LOC_PROT_ERR; a region registered afterwards (its lkey may reuse the
// old one's slot) is used.
func TestFastPathSeesLocalDeregistration(t *testing.T) {
	forBoth(t, func(t *testing.T, p *pair) {
		binary.NativeEndian.PutUint64(p.peer.Bytes(), 42)
		p.expect(t, "READ", p.wr(verbs.OpRead, 8), verbs.StatusSuccess)
		old := p.wr(verbs.OpRead, 8)
		if err := p.local.Deregister(); err != nil {
			t.Fatal(err)
		}
		mr, err := p.pd.AllocMR(4096, verbs.AccessAll)
		if err != nil {
			t.Fatal(err)
		}
		p.local = mr
		p.expect(t, "READ into the new region", p.wr(verbs.OpRead, 8), verbs.StatusSuccess)
		if got := binary.NativeEndian.Uint64(mr.Bytes()); got != 42 {
			t.Fatalf("READ into the new region got %d", got)
		}
		if old[0].SGL[0].LKey == mr.LKey() {
			return // the new region took the old lkey: nothing stale to name
		}
		p.expect(t, "READ into the deregistered region", old, verbs.StatusLocProtErr)
	})
}

// TestFastPathSeesResponderState: once the responder QP leaves RTS, a
// READ that succeeded before fails as if unanswered (RETRY_EXC_ERR).
func TestFastPathSeesResponderState(t *testing.T) {
	forBoth(t, func(t *testing.T, p *pair) {
		p.expect(t, "READ", p.wr(verbs.OpRead, 8), verbs.StatusSuccess)
		if err := p.peerQP.Modify(verbs.QPAttr{State: verbs.StateError}); err != nil {
			t.Fatal(err)
		}
		p.expect(t, "READ from a responder in ERROR", p.wr(verbs.OpRead, 8), verbs.StatusRetryExcErr)
	})
}

// TestFastPathChecksEachRequest: what the cached regions allow is decided
// per request — bounds, access, alignment, the rkey (0 included, which a
// QP with nothing cached must not take for its empty cache) — with the
// errors of the general path.
func TestFastPathChecksEachRequest(t *testing.T) {
	for _, cached := range []bool{false, true} {
		for _, zero := range []bool{true, false} {
			forBoth(t, func(t *testing.T, p *pair) {
				if cached {
					p.expect(t, "READ", p.wr(verbs.OpRead, 8), verbs.StatusSuccess)
				}
				wrs := p.wr(verbs.OpRead, 8)
				if wrs[0].RKey++; zero {
					wrs[0].RKey = 0
				}
				p.expect(t, "READ under a wrong rkey", wrs, verbs.StatusRemAccessErr)
			})
		}
	}
	forBoth(t, func(t *testing.T, p *pair) {
		p.expect(t, "READ", p.wr(verbs.OpRead, 8), verbs.StatusSuccess)
		wrs := p.wr(verbs.OpRead, 8)
		wrs[0].RemoteAddr += uint64(p.peer.Len()) - 4
		p.expect(t, "READ across the region's end", wrs, verbs.StatusRemAccessErr)
	})
	forBoth(t, func(t *testing.T, p *pair) {
		p.expect(t, "CAS", p.wr(verbs.OpAtomicCmpAndSwp, 8), verbs.StatusSuccess)
		wrs := p.wr(verbs.OpAtomicCmpAndSwp, 8)
		wrs[0].RemoteAddr += 4
		p.expect(t, "misaligned CAS", wrs, verbs.StatusRemInvReqErr)
	})
	forBoth(t, func(t *testing.T, p *pair) {
		ro, err := p.peerPD.AllocMR(4096, verbs.AccessRemoteRead)
		if err != nil {
			t.Fatal(err)
		}
		waitMapped(t, p.dev, p.peerDev.Address(), ro.RKey())
		p.peer = ro
		p.expect(t, "READ of a read-only region", p.wr(verbs.OpRead, 8), verbs.StatusSuccess)
		p.expect(t, "WRITE to a read-only region", p.wr(verbs.OpWrite, 8), verbs.StatusRemAccessErr)
	})
	forBoth(t, func(t *testing.T, p *pair) {
		p.expect(t, "READ", p.wr(verbs.OpRead, 8), verbs.StatusSuccess)
		wrs := p.wr(verbs.OpRead, 8)
		wrs[0].SGL[0].Addr += uint64(p.local.Len()) - 4
		p.expect(t, "READ across the local region's end", wrs, verbs.StatusLocProtErr)
	})
}

// TestFastPathAfterPeerCloses: once the link to a closed peer is down
// and the peer's memory unmapped here, a READ that succeeded before fails
// (it must not touch the unmapped memory its QP's cache named).
func TestFastPathAfterPeerCloses(t *testing.T) {
	forBoth(t, func(t *testing.T, p *pair) {
		p.expect(t, "READ", p.wr(verbs.OpRead, 8), verbs.StatusSuccess)
		rkey := p.peer.RKey()
		if err := p.peerDev.Close(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); shm.Mapped(p.dev, p.peerDev.Address(), rkey); {
			if time.Now().After(deadline) {
				t.Fatal("the closed peer's region stays mapped")
			}
			time.Sleep(time.Millisecond)
		}
		if wc := p.once(t, p.wr(verbs.OpRead, 8)); wc.Status == verbs.StatusSuccess {
			t.Fatal("READ from a closed peer succeeded")
		}
	})
}

// TestFastPathTargetKilled: READs that run on the fast path against a
// target process's memory, with its region cached on the QP, keep going
// while the target is SIGKILLed: none crashes this process or hangs, and
// once the death is seen they fail (the cache is dropped before the
// mapping goes).
func TestFastPathTargetKilled(t *testing.T) {
	c := startChild(t, "target", "")
	f := c.line(t, "target")
	tAddr, tQPN, mrAddr, rkey := f[0], uint32(parseU(t, f[1])), parseU(t, f[2]), uint32(parseU(t, f[3]))
	e := mustEndpoint(t, 4096)
	if err := e.connect(tAddr, tQPN); err != nil {
		t.Fatal(err)
	}
	if err := c.Say(fmt.Sprintf("%s %d", e.dev.Address(), e.qp.QPN())); err != nil {
		t.Fatal(err)
	}
	c.line(t, "connected")
	waitMapped(t, e.dev, tAddr, rkey)
	read := verbs.SendWR{Opcode: verbs.OpRead, SGL: e.local(512, 8), RemoteAddr: mrAddr, RKey: rkey}
	for i := 0; i < 100; i++ {
		if wc := e.do(t, read); wc.Status != verbs.StatusSuccess {
			t.Fatalf("READ %d before the kill: %v", i, wc.Status)
		}
	}
	c.kill(t)
	for deadline := time.Now().Add(10 * time.Second); ; {
		st := e.do(t, read).Status
		if st == verbs.StatusSuccess {
			if time.Now().After(deadline) {
				t.Fatal("READs of a killed target's memory still succeed after 10 s")
			}
			continue
		}
		if st != verbs.StatusRetryExcErr && st != verbs.StatusRemAccessErr && st != verbs.StatusWRFlushErr {
			t.Fatalf("READ after the kill: %v, want RETRY_EXC_ERR (or REM_ACCESS_ERR)", st)
		}
		break
	}
}
