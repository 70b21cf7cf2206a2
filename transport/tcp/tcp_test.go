package tcp_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/transport/tcp"
	"github.com/rdmakit/rdmakit/verbs"
)

func hostOf(t testing.TB, d verbs.Device) string {
	t.Helper()
	u, err := url.Parse(d.Address())
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

func waitWC(t testing.TB, cq verbs.CQ, n int) []verbs.WC {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := make([]verbs.WC, 0, n)
	wc := make([]verbs.WC, 256)
	for len(out) < n {
		k, err := verbs.PollWait(ctx, cq, wc[:min(len(wc), n-len(out))], verbs.PollAdaptive)
		if err != nil {
			t.Fatalf("after %d of %d completions: %v", len(out), n, err)
		}
		out = append(out, wc[:k]...)
	}
	return out
}

func TestHotPathAllocatesNothing(t *testing.T) {
	p := newTCPPair(t)
	wc := make([]verbs.WC, 4)
	ctx := context.Background()
	for _, list := range []int{1, 16} {
		wrs := p.reads(list)
		run := func() {
			if err := p.qp.PostSend(wrs); err != nil {
				t.Fatal(err)
			}
			if n, err := verbs.PollWait(ctx, p.cq, wc, verbs.PollAdaptive); n != 1 || err != nil || wc[0].Status != verbs.StatusSuccess {
				t.Fatalf("n=%d err=%v %+v", n, err, wc[0])
			}
		}
		for i := 0; i < 100; i++ { // let buffers reach their steady size
			run()
		}
		if a := testing.AllocsPerRun(500, run); a != 0 {
			t.Errorf("post list of %d: %v allocations per post+poll", list, a)
		}
	}
}

// TestWrongToken: a device with another token is refused with a typed
// error; the node keeps serving a correct peer.
func TestWrongToken(t *testing.T) {
	srv, err := verbs.Open("tcp://127.0.0.1:0?token=secret")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	bad, _ := verbs.Open("tcp://127.0.0.1:0?token=guess")
	defer bad.Close()
	pd, _ := bad.AllocPD()
	cq, _ := bad.CreateCQ(16)
	qp, _ := pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cq, RecvCQ: cq})
	err = verbs.ConnectRC(qp, verbs.AccessAll, srv.Address(), 1)
	if !errors.Is(err, tcp.ErrRejected) || !strings.Contains(err.Error(), "token") {
		t.Fatalf("connect with a wrong token: %v, want tcp.ErrRejected about the token", err)
	}
	good, _ := verbs.Open("tcp://127.0.0.1:0?token=secret")
	defer good.Close()
	checkServes(t, good, srv)
	if _, refused, _ := tcp.Stats(srv); refused != 1 {
		t.Errorf("refused = %d, want 1", refused)
	}
}

// checkServes connects client to server and does a READ/WRITE round.
func checkServes(t *testing.T, client, server verbs.Device) {
	t.Helper()
	pc, _ := client.AllocPD()
	ps, _ := server.AllocPD()
	cqc, _ := client.CreateCQ(16)
	cqs, _ := server.CreateCQ(16)
	qc, _ := pc.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cqc, RecvCQ: cqc})
	qs, _ := ps.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cqs, RecvCQ: cqs})
	if err := verbs.ConnectRC(qc, verbs.AccessAll, server.Address(), qs.QPN()); err != nil {
		t.Fatal(err)
	}
	if err := verbs.ConnectRC(qs, verbs.AccessAll, client.Address(), qc.QPN()); err != nil {
		t.Fatal(err)
	}
	mc, _ := pc.AllocMR(64, verbs.AccessAll)
	ms, _ := ps.AllocMR(64, verbs.AccessAll)
	copy(mc.Bytes(), "ping")
	err := qc.PostSend([]verbs.SendWR{
		{ID: 1, Opcode: verbs.OpWrite, SGL: []verbs.SGE{{Addr: mc.Addr(), Length: 4, LKey: mc.LKey()}}, RemoteAddr: ms.Addr(), RKey: ms.RKey()},
		{ID: 2, Opcode: verbs.OpRead, Flags: verbs.FlagSignaled, SGL: []verbs.SGE{{Addr: mc.Addr() + 8, Length: 4, LKey: mc.LKey()}}, RemoteAddr: ms.Addr(), RKey: ms.RKey()},
	})
	if err != nil {
		t.Fatal(err)
	}
	if wc := waitWC(t, cqc, 1)[0]; wc.ID != 2 || wc.Status != verbs.StatusSuccess || string(mc.Bytes()[8:12]) != "ping" {
		t.Fatalf("round trip: %+v, read %q", wc, mc.Bytes()[8:12])
	}
}

// TestMalformedFrames: garbage on a connection closes that connection only.
func TestMalformedFrames(t *testing.T) {
	srv, _ := verbs.Open("tcp://127.0.0.1:0")
	defer srv.Close()
	host := hostOf(t, srv)
	hello := func(c net.Conn) {
		var b []byte
		b = binary.LittleEndian.AppendUint32(b, 1+4+2+2+2+2)
		b = append(b, 1)
		b = binary.LittleEndian.AppendUint32(b, tcp.Magic)
		b = binary.LittleEndian.AppendUint16(b, tcp.Version)
		b = append(b, 0, 0, 0, 0, 0, 0)
		c.Write(b)
		hdr := make([]byte, 5)
		if _, err := c.Read(hdr); err != nil {
			t.Fatalf("no welcome: %v", err)
		}
	}
	cases := map[string]func(c net.Conn){
		"not rdmakit":     func(c net.Conn) { c.Write([]byte("GET / HTTP/1.1\r\n\r\n")) },
		"huge frame":      func(c net.Conn) { c.Write([]byte{0xff, 0xff, 0xff, 0x7f, 1}) },
		"zero frame":      func(c net.Conn) { c.Write([]byte{0, 0, 0, 0}) },
		"truncated hello": func(c net.Conn) { c.Write([]byte{3, 0, 0, 0, 1, 'R', 'D'}) },
		"request first":   func(c net.Conn) { c.Write([]byte{45, 0, 0, 0, 4}); c.Write(make([]byte, 44)) },
		"bad request":     func(c net.Conn) { hello(c); c.Write([]byte{3, 0, 0, 0, 4, 1, 2}) },
		"unknown frame":   func(c net.Conn) { hello(c); c.Write([]byte{1, 0, 0, 0, 99}) },
		"oversized after": func(c net.Conn) { hello(c); c.Write([]byte{0xff, 0xff, 0xff, 0x7f, 4}) },
		"reserved send flag": func(c net.Conn) {
			hello(c)
			b := make([]byte, 5+44)
			b[0] = 45
			b[4] = 4
			b[5] = byte(verbs.OpRead)
			b[7] = 0x10 // flags bit 4: reserved
			c.Write(b)
		},
		"payload mismatch": func(c net.Conn) {
			hello(c)
			b := make([]byte, 5+44)
			b[0] = 45
			b[4] = 4
			b[5] = byte(verbs.OpWrite)
			b[37] = 9
			c.Write(b)
		},
	}
	for name, send := range cases {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		send(c)
		// The node closes the connection: reads end with EOF, not a hang.
		buf := make([]byte, 4096)
		for {
			if _, err := c.Read(buf); err != nil {
				if errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "timeout") {
					t.Errorf("%s: connection not closed by the node", name)
				}
				break
			}
		}
		c.Close()
	}
	client, _ := verbs.Open("tcp://127.0.0.1:0")
	defer client.Close()
	checkServes(t, client, srv)
	if _, refused, _ := tcp.Stats(srv); refused < int64(len(cases)) {
		t.Errorf("refused %d connections, want ≥ %d", refused, len(cases))
	}
}

// TestManyOutstanding keeps 10,000 requests in flight on one QP.
func TestManyOutstanding(t *testing.T) {
	const n = 10000
	p := newTCPPairDepth(t, n)
	wrs := make([]verbs.SendWR, n)
	for i := range wrs {
		op := verbs.OpRead
		if i%2 == 1 {
			op = verbs.OpWrite
		}
		wrs[i] = verbs.SendWR{ID: uint64(i), Opcode: op, Flags: verbs.FlagSignaled,
			SGL:        []verbs.SGE{{Addr: p.local.Addr() + uint64(8*(i%1024)), Length: 8, LKey: p.local.LKey()}},
			RemoteAddr: p.peer.Addr() + uint64(8*(i%1024)), RKey: p.peer.RKey()}
	}
	if err := p.qp.PostSend(wrs); err != nil {
		t.Fatal(err)
	}
	for i, wc := range waitWC(t, p.cq, n) {
		if wc.ID != uint64(i) || wc.Status != verbs.StatusSuccess {
			t.Fatalf("completion %d: %+v", i, wc)
		}
	}
}

func newTCPPairDepth(tb testing.TB, depth int) *tpair {
	tb.Helper()
	must := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}
	a, err := verbs.Open("tcp://127.0.0.1:0")
	must(err)
	b, err := verbs.Open("tcp://127.0.0.1:0")
	must(err)
	tb.Cleanup(func() { a.Close(); b.Close() })
	pa, _ := a.AllocPD()
	pb, _ := b.AllocPD()
	cqa, _ := a.CreateCQ(2 * depth)
	cqb, _ := b.CreateCQ(64)
	qa, err := pa.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cqa, RecvCQ: cqa, Cap: verbs.QPCap{MaxSendWR: depth}})
	must(err)
	qb, err := pb.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cqb, RecvCQ: cqb})
	must(err)
	must(verbs.ConnectRC(qa, verbs.AccessAll, b.Address(), qb.QPN()))
	must(verbs.ConnectRC(qb, verbs.AccessAll, a.Address(), qa.QPN()))
	la, _ := pa.AllocMR(1<<20, verbs.AccessAll)
	lb, _ := pb.AllocMR(1<<20, verbs.AccessAll)
	return &tpair{cq: cqa, qp: qa, local: la, peer: lb}
}

// TestDoorbellPerRequest runs post lists over a device that writes every
// request on its own (doorbell=wr): same results, in order.
func TestDoorbellPerRequest(t *testing.T) {
	if _, err := verbs.Open("tcp://127.0.0.1:0?doorbell=nope"); !errors.Is(err, verbs.ErrBadURI) {
		t.Fatalf("doorbell=nope: %v", err)
	}
	a, err := verbs.Open("tcp://127.0.0.1:0?doorbell=wr")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := verbs.Open("tcp://127.0.0.1:0")
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
	if err := verbs.ConnectRC(qa, verbs.AccessAll, b.Address(), qb.QPN()); err != nil {
		t.Fatal(err)
	}
	if err := verbs.ConnectRC(qb, verbs.AccessAll, a.Address(), qa.QPN()); err != nil {
		t.Fatal(err)
	}
	la, _ := pa.AllocMR(4096, verbs.AccessAll)
	rb, _ := pb.AllocMR(4096, verbs.AccessAll)
	for i := 0; i < 16; i++ {
		rb.Bytes()[i*8] = byte(i + 1)
	}
	wrs := make([]verbs.SendWR, 16)
	for i := range wrs {
		wrs[i] = verbs.SendWR{ID: uint64(i), Opcode: verbs.OpRead, Flags: verbs.FlagSignaled,
			SGL:        []verbs.SGE{{Addr: la.Addr() + uint64(i*8), Length: 8, LKey: la.LKey()}},
			RemoteAddr: rb.Addr() + uint64(i*8), RKey: rb.RKey()}
	}
	if err := qa.PostSend(wrs); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wc := make([]verbs.WC, 16)
	for got := 0; got < 16; {
		n, err := verbs.PollWait(ctx, cqa, wc[got:], verbs.PollAdaptive)
		if err != nil {
			t.Fatal(err)
		}
		for i := got; i < got+n; i++ {
			if wc[i].Status != verbs.StatusSuccess || wc[i].ID != uint64(i) {
				t.Fatalf("completion %d: %+v", i, wc[i])
			}
		}
		got += n
	}
	for i := 0; i < 16; i++ {
		if la.Bytes()[i*8] != byte(i+1) {
			t.Fatalf("READ %d got %d", i, la.Bytes()[i*8])
		}
	}
}
