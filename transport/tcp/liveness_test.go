package tcp

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// silentPeer listens as a node that completes the handshake and then
// answers nothing, like a SIGSTOPped process whose kernel still accepts
// bytes. It returns the peer's device address.
func silentPeer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	addr := Scheme + "://" + ln.Addr().String()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			go func() {
				if _, _, err := newFrameReader(c, maxHandshake, maxHandshake).next(); err != nil {
					return
				}
				c.Write(appendWelcome(nil, &welcome{version: Version, peerID: 1, address: addr}))
				io.Copy(io.Discard, c)
			}()
		}
	}()
	return addr
}

// TestWritesAreNotProgress: keep-alive PINGs and small requests go into
// the socket buffer whether or not the peer runs, so they must not count
// as the link's progress; before, each one postponed the RETRY_EXC_ERR of
// a stopped peer's requests by up to a retry budget.
func TestWritesAreNotProgress(t *testing.T) {
	d := testDevice(t, options{})
	tgt, err := d.Resolve(silentPeer(t))
	if err != nil {
		t.Fatal(err)
	}
	l := tgt.(*link)
	time.Sleep(30 * time.Millisecond)
	l.Progressed(20 * time.Millisecond) // the grace begins
	time.Sleep(30 * time.Millisecond)
	if l.Progressed(20 * time.Millisecond) {
		t.Fatal("a silent link progressed after its grace")
	}
	l.send(appendPing(nil, framePing, 1))
	l.mu.Lock()
	unsent := len(l.out)
	l.mu.Unlock()
	if unsent != 0 || l.Dead() {
		t.Fatalf("the PING was not written (%d bytes left, dead %v)", unsent, l.Dead())
	}
	if l.Progressed(20 * time.Millisecond) {
		t.Error("a PING written into the socket buffer counts as progress of a silent link")
	}
}

// TestSilentPeerDetected: the requests to a peer that stopped answering
// complete with RETRY_EXC_ERR after the QP's retry budget, long before the
// keep-alive declares the link dead.
func TestSilentPeerDetected(t *testing.T) {
	d := testDevice(t, options{keepalive: time.Hour})
	peer := silentPeer(t)
	pd, _ := d.AllocPD()
	cq, _ := d.CreateCQ(16)
	qp, _ := pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq})
	if err := verbs.ConnectRC(qp, verbs.AccessAll, peer, 0x1234); err != nil {
		t.Fatal(err)
	}
	mr, _ := pd.AllocMR(64, verbs.AccessAll)
	wr := verbs.SendWR{ID: 7, Opcode: verbs.OpRead, Flags: verbs.FlagSignaled,
		SGL: []verbs.SGE{{Addr: mr.Addr(), Length: 8, LKey: mr.LKey()}}, RemoteAddr: 4096, RKey: 1}
	if err := qp.PostSend([]verbs.SendWR{wr}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wc := make([]verbs.WC, 1)
	if n, err := verbs.PollWait(ctx, cq, wc, verbs.PollAdaptive); n != 1 || err != nil {
		t.Fatalf("the request to a silent peer never completed: %v", err)
	}
	if wc[0].ID != 7 || wc[0].Status != verbs.StatusRetryExcErr {
		t.Fatalf("completion %+v, want RETRY_EXC_ERR", wc[0])
	}
}

// TestSilentLinkGrace: a link first found silent for a retry budget gets
// one more budget (a responder starved of CPU on a loaded machine was
// silent for a retry budget and then answered: its requests failed with
// RETRY_EXC_ERR); a silent one fails after it, and only a RESPONSE earns
// another grace (a peer that answers PINGs but drops the requests does
// not keep them alive).
func TestSilentLinkGrace(t *testing.T) {
	const d = 20 * time.Millisecond
	dev := testDevice(t, options{keepalive: time.Hour})
	tgt, err := dev.Resolve(silentPeer(t))
	if err != nil {
		t.Fatal(err)
	}
	l := tgt.(*link)
	time.Sleep(30 * time.Millisecond)
	if !l.Progressed(d) {
		t.Fatal("a link silent for one budget was declared dead at once")
	}
	time.Sleep(30 * time.Millisecond)
	if l.Progressed(d) {
		t.Fatal("a link silent for its grace too progressed")
	}
	// Bytes that are no RESPONSE (a PONG) renew nothing.
	l.lastRecv.Store(time.Now().UnixNano())
	time.Sleep(30 * time.Millisecond)
	if l.Progressed(d) {
		t.Fatal("a link that took no RESPONSE since its grace got another")
	}
	// A RESPONSE taken since the grace earns the next silence one.
	l.resps.Add(1)
	if !l.Progressed(d) {
		t.Fatal("a link that answered since its grace got no new one")
	}
	time.Sleep(30 * time.Millisecond)
	if l.Progressed(d) {
		t.Fatal("the new grace did not end")
	}
}
