package tcp

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/nic"
	"github.com/rdmakit/rdmakit/verbs"
)

// rawClient is a hand-made peer: it holds the node's token and speaks the
// wire protocol, but is no device.
type rawClient struct {
	t  *testing.T
	c  net.Conn
	fr *frameReader
}

func dialRaw(t *testing.T, d *device, address, token string) *rawClient {
	t.Helper()
	c, err := net.Dial("tcp", d.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(appendHello(nil, &hello{version: Version, address: address, token: token})); err != nil {
		t.Fatal(err)
	}
	rc := &rawClient{t: t, c: c, fr: newFrameReader(c, 64<<10, maxFrame)}
	if typ, _, err := rc.fr.next(); err != nil || typ != frameWelcome {
		t.Fatalf("no welcome: type %d, %v", typ, err)
	}
	return rc
}

func (rc *rawClient) send(r *nic.Request) {
	if _, err := rc.c.Write(appendRequest(nil, r)); err != nil {
		rc.t.Fatal(err)
	}
}

// until reads responses up to the one of sequence number seq, returning
// those before it.
func (rc *rawClient) until(seq uint32) (before []nic.Response, last nic.Response) {
	rc.t.Helper()
	for {
		typ, body, err := rc.fr.next()
		if err != nil {
			rc.t.Fatalf("waiting for the answer to %d: %v", seq, err)
		}
		if typ != frameResp {
			continue
		}
		var r nic.Response
		if err := decodeResponse(body, &r); err != nil {
			rc.t.Fatal(err)
		}
		r.Data = append([]byte(nil), r.Data...)
		if r.Seq == seq {
			return before, r
		}
		before = append(before, r)
	}
}

// TestOtherTenantsQPRefused: a raw client that is the legitimate peer of
// its own QP on a node names another tenant's QP in READ, WRITE and
// scratch-area requests. It gets no answer at all (no SUCCESS, no data),
// the victim's region and scratch area are unchanged, and the node counts
// every request as from the wrong peer. Before isolation it read the
// victim's region with SUCCESS.
func TestOtherTenantsQPRefused(t *testing.T) {
	opts := options{dialTimeout: 5 * time.Second, keepalive: time.Second, token: "secret"}
	srv, err := listen("127.0.0.1:0", "", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	victim, err := listen("127.0.0.1:0", "", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer victim.Close()

	// The victim's connection: QP qs on the node, qv on the victim.
	ps, _ := srv.AllocPD()
	cqs, _ := srv.CreateCQ(16)
	qs, _ := ps.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cqs, RecvCQ: cqs})
	pv, _ := victim.AllocPD()
	cqv, _ := victim.CreateCQ(16)
	qv, _ := pv.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cqv, RecvCQ: cqv})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(verbs.ConnectRC(qv, verbs.AccessAll, srv.Address(), qs.QPN()))
	must(verbs.ConnectRC(qs, verbs.AccessAll, victim.Address(), qv.QPN()))
	secret, _ := ps.AllocMR(64, verbs.AccessAll)
	copy(secret.Bytes(), "victim!!")
	lv, _ := pv.AllocMR(64, verbs.AccessAll)
	copy(lv.Bytes(), "scratch!")
	// The victim puts something in its private scratch area on the node.
	must(qv.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpWrite, Flags: verbs.FlagSignaled,
		SGL: []verbs.SGE{{Addr: lv.Addr(), Length: 8, LKey: lv.LKey()}}, RemoteAddr: verbs.ScratchAddr(0)}}))
	if wc := waitOne(t, cqv); wc.Status != verbs.StatusSuccess {
		t.Fatalf("victim's scratch WRITE: %+v", wc)
	}

	// The attacker's connection: the node's QP qa is connected to the
	// attacker's QP 77 at an address nobody listens on.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	attacker := Scheme + "://" + ln.Addr().String()
	ln.Close()
	qa, _ := ps.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cqs, RecvCQ: cqs})
	must(verbs.ConnectRC(qa, verbs.AccessAll, attacker, 77))
	own, _ := ps.AllocMR(64, verbs.AccessAll)
	copy(own.Bytes(), "attacker")
	rc := dialRaw(t, srv, attacker, "secret")

	seq := uint32(0)
	req := func(src, dst uint32, op verbs.Opcode, rkey uint32, addr uint64, payload string) *nic.Request {
		seq++
		r := &nic.Request{SrcQPN: src, DstQPN: dst, Epoch: 1, Seq: seq, Opcode: op, RKey: rkey, RemoteAddr: addr, Length: 8}
		if payload != "" {
			r.Payload = [][]byte{[]byte(payload)}
		}
		return r
	}
	// Its own QP serves it: the harness works and it is a legitimate peer.
	rc.send(req(77, qa.QPN(), verbs.OpRead, own.RKey(), own.Addr(), ""))
	if _, r := rc.until(seq); r.Status != verbs.StatusSuccess || string(r.Data) != "attacker" {
		t.Fatalf("READ of its own region: %+v", r)
	}
	first := seq + 1
	for _, src := range []uint32{77, qv.QPN()} { // its own QP number, and the victim's
		rc.send(req(src, qs.QPN(), verbs.OpRead, secret.RKey(), secret.Addr(), ""))
		rc.send(req(src, qs.QPN(), verbs.OpWrite, secret.RKey(), secret.Addr(), "pwned!!!"))
		rc.send(req(src, qs.QPN(), verbs.OpRead, 0, verbs.ScratchAddr(0), ""))
		rc.send(req(src, qs.QPN(), verbs.OpWrite, 0, verbs.ScratchAddr(0), "pwned!!!"))
		rc.send(req(src, qs.QPN(), verbs.OpAtomicFetchAndAdd, secret.RKey(), secret.Addr(), ""))
	}
	hostile := seq - first + 1
	// A last legitimate request: its answer comes after any answer to
	// the hostile ones (one connection, served in order).
	rc.send(req(77, qa.QPN(), verbs.OpRead, own.RKey(), own.Addr(), ""))
	before, last := rc.until(seq)
	if len(before) != 0 || last.Status != verbs.StatusSuccess {
		t.Errorf("answers to other tenants' requests: %+v (then %+v), want none", before, last)
	}
	if string(secret.Bytes()[:8]) != "victim!!" {
		t.Errorf("victim's region now %q", secret.Bytes()[:8])
	}
	must(qv.PostSend([]verbs.SendWR{{ID: 2, Opcode: verbs.OpRead, Flags: verbs.FlagSignaled,
		SGL: []verbs.SGE{{Addr: lv.Addr() + 8, Length: 8, LKey: lv.LKey()}}, RemoteAddr: verbs.ScratchAddr(0)}}))
	if wc := waitOne(t, cqv); wc.Status != verbs.StatusSuccess || string(lv.Bytes()[8:16]) != "scratch!" {
		t.Errorf("victim's scratch area: %+v %q", wc, lv.Bytes()[8:16])
	}
	st, _, _ := Stats(srv)
	if st.WrongPeer != uint64(hostile) {
		t.Errorf("WrongPeer = %d, want %d", st.WrongPeer, hostile)
	}
}

// TestDatagramWrongQKeyDropped: a UD datagram with another QKey than the
// destination QP's is dropped: no receive completes, and the next
// datagram with the right QKey is delivered.
func TestDatagramWrongQKeyDropped(t *testing.T) {
	a, err := listen("127.0.0.1:0", "", options{dialTimeout: 5 * time.Second, keepalive: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := listen("127.0.0.1:0", "", options{dialTimeout: 5 * time.Second, keepalive: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	pa, _ := a.AllocPD()
	pb, _ := b.AllocPD()
	cqa, _ := a.CreateCQ(16)
	cqb, _ := b.CreateCQ(16)
	qa, _ := pa.CreateQP(verbs.QPInitAttr{Type: verbs.UD, SendCQ: cqa, RecvCQ: cqa})
	qb, _ := pb.CreateQP(verbs.QPInitAttr{Type: verbs.UD, SendCQ: cqb, RecvCQ: cqb})
	for _, q := range []verbs.QP{qa, qb} {
		for _, s := range []verbs.QPState{verbs.StateInit, verbs.StateRTR, verbs.StateRTS} {
			if err := q.Modify(verbs.QPAttr{State: s, QKey: 0x1234}); err != nil {
				t.Fatal(err)
			}
		}
	}
	ma, _ := pa.AllocMR(64, verbs.AccessAll)
	mb, _ := pb.AllocMR(256, verbs.AccessAll)
	if err := qb.PostRecv([]verbs.RecvWR{{ID: 9, SGL: []verbs.SGE{{Addr: mb.Addr(), Length: 256, LKey: mb.LKey()}}}}); err != nil {
		t.Fatal(err)
	}
	ah, err := pa.CreateAH(b.Address())
	if err != nil {
		t.Fatal(err)
	}
	send := func(id uint64, qkey uint32, msg string) {
		copy(ma.Bytes(), msg)
		if err := qa.PostSend([]verbs.SendWR{{ID: id, Opcode: verbs.OpSend, Flags: verbs.FlagSignaled, AH: ah, RemoteQPN: qb.QPN(), RemoteQKey: qkey,
			SGL: []verbs.SGE{{Addr: ma.Addr(), Length: uint32(len(msg)), LKey: ma.LKey()}}}}); err != nil {
			t.Fatal(err)
		}
		if wc := waitOne(t, cqa); wc.Status != verbs.StatusSuccess {
			t.Fatalf("send %d: %+v", id, wc)
		}
	}
	send(1, 0x9999, "wrong")
	send(2, 0x1234, "right")
	wc := waitOne(t, cqb)
	if wc.ID != 9 || wc.Status != verbs.StatusSuccess || string(mb.Bytes()[40:45]) != "right" {
		t.Fatalf("receive: %+v, data %q; want the datagram with the right QKey", wc, mb.Bytes()[40:45])
	}
}

// waitOne waits for one completion on cq.
func waitOne(t *testing.T, cq verbs.CQ) verbs.WC {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wc := make([]verbs.WC, 1)
	if _, err := verbs.PollWait(ctx, cq, wc, verbs.PollAdaptive); err != nil {
		t.Fatal(err)
	}
	return wc[0]
}

// fakeNode is a hand-made listener that speaks the wire protocol: it
// welcomes one dialer and hands the requests it receives to the test,
// which answers (or not) as it likes.
type fakeNode struct {
	ln   net.Listener
	reqs chan nic.Request
	conn chan net.Conn
}

func newFakeNode(t *testing.T) *fakeNode {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeNode{ln: ln, reqs: make(chan nic.Request, 16), conn: make(chan net.Conn, 1)}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		t.Cleanup(func() { c.Close() })
		fr := newFrameReader(c, 64<<10, maxFrame)
		if typ, _, err := fr.next(); err != nil || typ != frameHello {
			return
		}
		c.Write(appendWelcome(nil, &welcome{version: Version, peerID: 1, address: f.address()}))
		f.conn <- c
		for {
			typ, body, err := fr.next()
			if err != nil {
				return
			}
			var r nic.Request
			var pbuf [1][]byte
			if typ == frameRequest && decodeRequest(body, &r, &pbuf) == nil {
				f.reqs <- r
			}
		}
	}()
	return f
}

func (f *fakeNode) address() string { return Scheme + "://" + f.ln.Addr().String() }

// TestResponseFromAnotherNodeIgnored: a node answers only the requests
// sent to it. A hostile node that sends a response naming a QP of its
// dialer connected to another node — right QP number, epoch and sequence
// number — is ignored; the genuine answer completes the request.
func TestResponseFromAnotherNodeIgnored(t *testing.T) {
	a, err := listen("127.0.0.1:0", "", options{dialTimeout: 5 * time.Second, keepalive: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	honest, hostile := newFakeNode(t), newFakeNode(t)
	pd, _ := a.AllocPD()
	cq, _ := a.CreateCQ(16)
	q1, _ := pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq})
	q2, _ := pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq})
	if err := verbs.ConnectRC(q1, verbs.AccessAll, honest.address(), 5); err != nil {
		t.Fatal(err)
	}
	if err := verbs.ConnectRC(q2, verbs.AccessAll, hostile.address(), 6); err != nil {
		t.Fatal(err)
	}
	hc, bc := <-hostile.conn, <-honest.conn
	m, _ := pd.AllocMR(64, verbs.AccessAll)
	read := func(q verbs.QP, id uint64, off uint64) {
		t.Helper()
		if err := q.PostSend([]verbs.SendWR{{ID: id, Opcode: verbs.OpRead, Flags: verbs.FlagSignaled,
			SGL: []verbs.SGE{{Addr: m.Addr() + off, Length: 8, LKey: m.LKey()}}, RemoteAddr: 4096, RKey: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	read(q1, 1, 0)
	r1 := <-honest.reqs
	// The hostile node forges the answer to q1's READ, then answers q2's
	// own READ: once q2's completes, the forgery was handled.
	hc.Write(appendResponse(nil, &nic.Response{SrcQPN: q1.QPN(), Epoch: r1.Epoch, Seq: r1.Seq, Data: []byte("forged!!")}))
	read(q2, 2, 8)
	r2 := <-hostile.reqs
	hc.Write(appendResponse(nil, &nic.Response{SrcQPN: r2.SrcQPN, Epoch: r2.Epoch, Seq: r2.Seq, Data: []byte("its own!")}))
	if wc := waitOne(t, cq); wc.ID != 2 || wc.Status != verbs.StatusSuccess {
		t.Fatalf("first completion %+v (data %q), want q2's READ", wc, m.Bytes()[:8])
	}
	bc.Write(appendResponse(nil, &nic.Response{SrcQPN: r1.SrcQPN, Epoch: r1.Epoch, Seq: r1.Seq, Data: []byte("genuine!")}))
	if wc := waitOne(t, cq); wc.ID != 1 || wc.Status != verbs.StatusSuccess || string(m.Bytes()[:8]) != "genuine!" {
		t.Fatalf("q1's READ: %+v, data %q; want the honest node's answer", wc, m.Bytes()[:8])
	}
}
