package tcp

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// frameCounter is a served connection that counts the REQUEST frames its
// peer sends on it.
type frameCounter struct {
	net.Conn
	mu       sync.Mutex
	buf      []byte
	requests *atomic.Int64
}

func (c *frameCounter) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf = append(c.buf, p[:n]...)
	for len(c.buf) >= 5 {
		k := 4 + int(binary.LittleEndian.Uint32(c.buf))
		if len(c.buf) < k {
			break
		}
		if c.buf[4] == frameRequest {
			c.requests.Add(1)
		}
		c.buf = c.buf[k:]
	}
	return n, err
}

// echoOnce connects an RC QP on a to one on b (b's first, as the
// connection manager does), sends one message from a, has b send it back
// and returns what a received and b's send completion.
func echoOnce(t *testing.T, a, b verbs.Device) (verbs.WC, []byte, verbs.WC) {
	t.Helper()
	type end struct {
		qp verbs.QP
		cq verbs.CQ
		mr verbs.MR
	}
	mk := func(d verbs.Device) end {
		pd, err := d.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		cq, _ := d.CreateCQ(16)
		qp, err := pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq})
		if err != nil {
			t.Fatal(err)
		}
		mr, _ := pd.AllocMR(4096, verbs.AccessAll)
		return end{qp, cq, mr}
	}
	ea, eb := mk(a), mk(b)
	if err := verbs.ConnectRC(eb.qp, verbs.AccessAll, a.Address(), ea.qp.QPN()); err != nil {
		t.Fatal(err)
	}
	if err := verbs.ConnectRC(ea.qp, verbs.AccessAll, b.Address(), eb.qp.QPN()); err != nil {
		t.Fatal(err)
	}
	recv := func(e end) {
		if err := e.qp.PostRecv([]verbs.RecvWR{{ID: 7, SGL: []verbs.SGE{{Addr: e.mr.Addr() + 2048, Length: 64, LKey: e.mr.LKey()}}}}); err != nil {
			t.Fatal(err)
		}
	}
	send := func(e end, n uint32) {
		if err := e.qp.PostSend([]verbs.SendWR{{ID: 9, Opcode: verbs.OpSend, Flags: verbs.FlagSignaled,
			SGL: []verbs.SGE{{Addr: e.mr.Addr(), Length: n, LKey: e.mr.LKey()}}}}); err != nil {
			t.Fatal(err)
		}
	}
	recv(ea)
	recv(eb)
	copy(ea.mr.Bytes(), "question")
	send(ea, 8)
	var got verbs.WC
	for _, wc := range []verbs.WC{waitOne(t, eb.cq)} {
		if wc.Opcode != verbs.WCRecv || wc.Status != verbs.StatusSuccess {
			t.Fatalf("b: %+v", wc)
		}
		copy(eb.mr.Bytes(), eb.mr.Bytes()[2048:2048+wc.ByteLen])
		send(eb, wc.ByteLen)
	}
	var sent, echoed bool
	for !sent || !echoed {
		wc := waitOne(t, ea.cq)
		switch wc.Opcode {
		case verbs.WCRecv:
			got, echoed = wc, true
		default:
			if wc.Status != verbs.StatusSuccess {
				t.Fatalf("a's SEND: %+v", wc)
			}
			sent = true
		}
	}
	return got, ea.mr.Bytes()[2048 : 2048+got.ByteLen], waitOne(t, eb.cq)
}

// TestEchoComesBackOnTheRequestsConnection: a node that answers a SEND
// with a SEND sends the answer on the connection the question came on, so
// the asker reads both the acknowledgement and the answer from its own
// link; the connection the answerer dialed carries no request. With
// share=0 the answer goes on the answerer's own link, as before.
func TestEchoComesBackOnTheRequestsConnection(t *testing.T) {
	for _, share := range []bool{true, false} {
		var requests atomic.Int64 // requests a is sent on connections it serves
		opts := options{dialTimeout: 5 * time.Second, keepalive: time.Second, spin: DefaultSpin, share: share}
		b, err := listen("127.0.0.1:0", "", opts)
		if err != nil {
			t.Fatal(err)
		}
		opts.wrapConn = func(c net.Conn) net.Conn { return &frameCounter{Conn: c, requests: &requests} }
		da, err := listen("127.0.0.1:0", "", opts)
		if err != nil {
			t.Fatal(err)
		}
		a := verbs.Device(da)

		wc, msg, bwc := echoOnce(t, a, b)
		if wc.Status != verbs.StatusSuccess || string(msg) != "question" {
			t.Errorf("share=%v: echo %+v %q", share, wc, msg)
		}
		if bwc.Opcode != verbs.WCSend || bwc.Status != verbs.StatusSuccess {
			t.Errorf("share=%v: b's echo completed %+v", share, bwc)
		}
		if addr, err := da.peers.Address(wc.SrcID); err != nil || addr != b.Address() {
			t.Errorf("share=%v: the echo's SrcID %d is %q (%v), want %s", share, wc.SrcID, addr, err, b.Address())
		}
		switch n := requests.Load(); {
		case share && n != 0:
			t.Errorf("shared: %d requests came on the connection b dialed", n)
		case !share && n == 0:
			t.Errorf("share=0: the echo did not come on the connection b dialed")
		}
		a.Close()
		b.Close()
	}
}

// TestSharedConnectionDeathFailsItsRequests: when the connection a
// node's requests were routed through closes (its peer died), those
// requests fail with RETRY_EXC_ERR at once, and later ones too.
func TestSharedConnectionDeathFailsItsRequests(t *testing.T) {
	a, err := verbs.Open("tcp://127.0.0.1:0?share=1")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := verbs.Open("tcp://127.0.0.1:0?share=1")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	pa, _ := a.AllocPD()
	pb, _ := b.AllocPD()
	cqa, _ := a.CreateCQ(16)
	cqb, _ := b.CreateCQ(16)
	qa, _ := pa.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cqa, RecvCQ: cqa})
	qb, _ := pb.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cqb, RecvCQ: cqb})
	if err := verbs.ConnectRC(qb, verbs.AccessAll, a.Address(), qa.QPN()); err != nil {
		t.Fatal(err)
	}
	if err := verbs.ConnectRC(qa, verbs.AccessAll, b.Address(), qb.QPN()); err != nil {
		t.Fatal(err)
	}
	ma, _ := pa.AllocMR(4096, verbs.AccessAll)
	mb, _ := pb.AllocMR(4096, verbs.AccessAll)
	read := func(qp verbs.QP, local, remote verbs.MR) {
		if err := qp.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpRead, Flags: verbs.FlagSignaled,
			SGL:        []verbs.SGE{{Addr: local.Addr(), Length: 8, LKey: local.LKey()}},
			RemoteAddr: remote.Addr(), RKey: remote.RKey()}}); err != nil {
			t.Fatal(err)
		}
	}
	read(qa, ma, mb) // a's requests now come on the connection a dialed
	if wc := waitOne(t, cqa); wc.Status != verbs.StatusSuccess {
		t.Fatalf("a's READ: %+v", wc)
	}
	read(qb, mb, ma) // so b's go on it too
	if wc := waitOne(t, cqb); wc.Status != verbs.StatusSuccess {
		t.Fatalf("b's READ: %+v", wc)
	}
	db, _ := asDevice(b)
	l, _ := db.links.Lookup(a.Address())
	if l == nil || l.via.Load() == nil {
		t.Fatal("b's link to a is not routed through the connection a dialed")
	}
	start := time.Now()
	if err := Crash(a); err != nil {
		t.Fatal(err)
	}
	read(qb, mb, ma)
	if wc := waitOne(t, cqb); wc.Status != verbs.StatusRetryExcErr {
		t.Fatalf("b's READ to a dead peer: %+v", wc)
	}
	t.Logf("failed after %v", time.Since(start))
}

// mixedWrites is a connection that counts the writes carrying both a
// RESPONSE and a REQUEST frame.
type mixedWrites struct {
	net.Conn
	mixed *atomic.Int64
}

func (c *mixedWrites) Write(b []byte) (int, error) {
	var resp, req bool
	for p := b; len(p) >= 5; {
		k := 4 + int(binary.LittleEndian.Uint32(p))
		if k > len(p) {
			break
		}
		resp = resp || p[4] == frameResp
		req = req || p[4] == frameRequest
		p = p[k:]
	}
	if resp && req {
		c.mixed.Add(1)
	}
	return c.Conn.Write(b)
}

// TestAckAndAnswerShareAWrite: a node whose application answers a SEND at
// once writes the SEND's acknowledgement and the answer together, on the
// connection the SEND came on.
func TestAckAndAnswerShareAWrite(t *testing.T) {
	var mixed atomic.Int64
	opts := options{dialTimeout: 5 * time.Second, keepalive: time.Second, spin: DefaultSpin, share: true}
	a, err := listen("127.0.0.1:0", "", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	opts.wrapConn = func(c net.Conn) net.Conn { return &mixedWrites{Conn: c, mixed: &mixed} }
	b, err := listen("127.0.0.1:0", "", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	pa, _ := a.AllocPD()
	pb, _ := b.AllocPD()
	cqa, _ := a.CreateCQ(64)
	cqb, _ := b.CreateCQ(64)
	qa, _ := pa.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cqa, RecvCQ: cqa})
	qb, _ := pb.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cqb, RecvCQ: cqb})
	if err := verbs.ConnectRC(qb, verbs.AccessAll, a.Address(), qa.QPN()); err != nil {
		t.Fatal(err)
	}
	if err := verbs.ConnectRC(qa, verbs.AccessAll, b.Address(), qb.QPN()); err != nil {
		t.Fatal(err)
	}
	ma, _ := pa.AllocMR(4096, verbs.AccessAll)
	mb, _ := pb.AllocMR(4096, verbs.AccessAll)
	recv := func(qp verbs.QP, mr verbs.MR) {
		if err := qp.PostRecv([]verbs.RecvWR{{SGL: []verbs.SGE{{Addr: mr.Addr() + 64, Length: 64, LKey: mr.LKey()}}}}); err != nil {
			t.Error(err)
		}
	}
	send := func(qp verbs.QP, mr verbs.MR) {
		if err := qp.PostSend([]verbs.SendWR{{Opcode: verbs.OpSend, Flags: verbs.FlagSignaled,
			SGL: []verbs.SGE{{Addr: mr.Addr(), Length: 8, LKey: mr.LKey()}}}}); err != nil {
			t.Error(err)
		}
	}
	const rounds = 200
	recv(qb, mb)
	recv(qa, ma)
	done := make(chan struct{})
	go func() { // b answers every message at once
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		wc := make([]verbs.WC, 8)
		for got := 0; got < rounds; {
			n, err := verbs.PollWait(ctx, cqb, wc, verbs.PollAdaptive)
			if err != nil {
				t.Error(err)
				return
			}
			for _, w := range wc[:n] {
				if w.Status != verbs.StatusSuccess {
					t.Errorf("b: %+v", w)
					return
				}
				if w.Opcode == verbs.WCRecv {
					got++
					recv(qb, mb)
					send(qb, mb)
				}
			}
		}
	}()
	for range rounds {
		send(qa, ma)
		for sent, echoed := false, false; !sent || !echoed; {
			w := waitOne(t, cqa)
			if w.Status != verbs.StatusSuccess {
				t.Fatalf("a: %+v", w)
			}
			if w.Opcode == verbs.WCRecv {
				echoed = true
				recv(qa, ma)
			} else {
				sent = true
			}
		}
	}
	<-done
	if mixed.Load() == 0 {
		t.Errorf("no acknowledgement went in one write with the answer in %d rounds", rounds)
	}
	t.Logf("%d of %d acknowledgements went with the answer", mixed.Load(), rounds)
}

// TestShareIsOptIn: a device shares connections only when its URI says
// share=1, because a peer's claim to be the node at an address is not
// proven (docs/wire.md).
func TestShareIsOptIn(t *testing.T) {
	for uri, want := range map[string]bool{"tcp://127.0.0.1:0": false, "tcp://127.0.0.1:0?share=0": false, "tcp://127.0.0.1:0?share=1": true} {
		dev, err := verbs.Open(uri)
		if err != nil {
			t.Fatal(err)
		}
		d, _ := asDevice(dev)
		if d.opts.share != want {
			t.Errorf("%s: share %v, want %v", uri, d.opts.share, want)
		}
		dev.Close()
	}
	if _, err := verbs.Open("tcp://127.0.0.1:0?share=maybe"); err == nil {
		t.Error("share=maybe accepted")
	}
}
