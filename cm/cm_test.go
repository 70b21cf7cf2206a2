package cm

import (
	"bytes"
	"context"
	"errors"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// Connect, hand descriptors over both ways, then READ, WRITE and SEND in
// both directions over the connected QPs.
func TestConnectAndTransfer(t *testing.T) {
	srv, cli := newNode(t, "server"), newNode(t, "client")
	l := listen(t, srv)

	type accepted struct {
		c   *Conn
		req []byte
		err error
	}
	ch := make(chan accepted, 1)
	go func() {
		ctx := ctxT(t, 10*time.Second)
		r, err := l.Accept(ctx)
		if err != nil {
			ch <- accepted{err: err}
			return
		}
		if r.PeerAddress() != cli.dev.Address() || r.PeerQPN() == 0 || r.SideChannelAddr() == nil {
			ch <- accepted{err: errors.New("request does not describe the dialer")}
			return
		}
		c, err := r.Accept(ctx, srv.opts(EncodeDescs([]MRDesc{DescOf(srv.mr)})))
		ch <- accepted{c, r.PrivateData(), err}
	}()

	cc, err := Dial(ctxT(t, 10*time.Second), cli.dev, l.Addr(), cli.opts(EncodeDescs([]MRDesc{DescOf(cli.mr)})))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	a := <-ch
	if a.err != nil {
		t.Fatal(a.err)
	}
	sc := a.c
	defer sc.Close()

	if cc.QP().State() != verbs.StateRTS || sc.QP().State() != verbs.StateRTS {
		t.Fatalf("states: client %v server %v", cc.QP().State(), sc.QP().State())
	}
	if cc.PeerAddress() != srv.dev.Address() || cc.PeerQPN() != sc.QP().QPN() {
		t.Fatalf("client sees peer %s/%d, want %s/%d", cc.PeerAddress(), cc.PeerQPN(), srv.dev.Address(), sc.QP().QPN())
	}
	if sc.PeerAddress() != cli.dev.Address() || sc.PeerQPN() != cc.QP().QPN() {
		t.Fatalf("server sees peer %s/%d, want %s/%d", sc.PeerAddress(), sc.PeerQPN(), cli.dev.Address(), cc.QP().QPN())
	}
	if !bytes.Equal(a.req, sc.PeerPrivateData()) {
		t.Fatal("Request.PrivateData differs from Conn.PeerPrivateData")
	}
	srvDescs, err := DecodeDescs(cc.PeerPrivateData())
	if err != nil || len(srvDescs) != 1 || srvDescs[0] != DescOf(srv.mr) {
		t.Fatalf("client got server descs %v, %v", srvDescs, err)
	}
	cliDescs, err := DecodeDescs(sc.PeerPrivateData())
	if err != nil || len(cliDescs) != 1 || cliDescs[0] != DescOf(cli.mr) {
		t.Fatalf("server got client descs %v, %v", cliDescs, err)
	}
	if !strings.Contains(cc.String(), srv.dev.Address()) {
		t.Errorf("String() = %q", cc.String())
	}

	exercise(t, cli, cc, srv, sc, srvDescs[0])
	exercise(t, srv, sc, cli, cc, cliDescs[0])

	if err := cc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cc.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// Private data: none, arbitrary bytes, and exactly MaxPrivateData bytes,
// in both directions.
func TestPrivateData(t *testing.T) {
	srv, cli := newNode(t, "server"), newNode(t, "client")
	l := listen(t, srv)
	big := bytes.Repeat([]byte("0123456789abcdef"), MaxPrivateData/16)
	for _, tc := range []struct {
		name     string
		toServer []byte
		toClient []byte
	}{
		{"none", nil, nil},
		{"small", []byte("hello server"), []byte("hello client")},
		{"max", big, big[:MaxPrivateData-1]},
		{"one-way", nil, []byte{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch := acceptAsync(t, l, srv.opts(tc.toClient))
			cc, err := Dial(ctxT(t, 10*time.Second), cli.dev, l.Addr(), cli.opts(tc.toServer))
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			r := <-ch
			if r.err != nil {
				t.Fatal(r.err)
			}
			defer r.c.Close()
			if !bytes.Equal(cc.PeerPrivateData(), tc.toClient) {
				t.Errorf("client got %d bytes, want %d", len(cc.PeerPrivateData()), len(tc.toClient))
			}
			if !bytes.Equal(r.c.PeerPrivateData(), tc.toServer) {
				t.Errorf("server got %d bytes, want %d", len(r.c.PeerPrivateData()), len(tc.toServer))
			}
		})
	}
}

// A rejected dial returns the listener's reason; neither side keeps a QP.
func TestReject(t *testing.T) {
	srv, cli := newNode(t, "server"), newNode(t, "client")
	l := listen(t, srv)
	errc := make(chan error, 1)
	go func() {
		r, err := l.Accept(ctxT(t, 10*time.Second))
		if err != nil {
			errc <- err
			return
		}
		if string(r.PrivateData()) != "let me in" {
			errc <- errors.New("wrong private data")
			return
		}
		if err := r.Reject("no capacity: try node 7"); err != nil {
			errc <- err
			return
		}
		if err := r.Reject("again"); !errors.Is(err, ErrAnswered) {
			errc <- errors.New("second Reject did not fail with ErrAnswered")
			return
		}
		if _, err := r.Accept(context.Background(), srv.opts(nil)); !errors.Is(err, ErrAnswered) {
			errc <- errors.New("Accept after Reject did not fail with ErrAnswered")
			return
		}
		errc <- nil
	}()
	opts := cli.bareOpts(t)
	opts.PrivateData = []byte("let me in")
	_, err := Dial(ctxT(t, 10*time.Second), cli.dev, l.Addr(), opts)
	var rej *RejectedError
	if !errors.As(err, &rej) || !errors.Is(err, ErrRejected) || rej.Reason != "no capacity: try node 7" {
		t.Fatalf("Dial: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	mustDealloc(t, opts.PD)

	// A very long reason is truncated, not refused.
	go func() {
		r, err := l.Accept(ctxT(t, 10*time.Second))
		if err == nil {
			err = r.Reject(strings.Repeat("é", MaxReasonLen))
		}
		errc <- err
	}()
	_, err = Dial(ctxT(t, 10*time.Second), cli.dev, l.Addr(), cli.opts(nil))
	if !errors.As(err, &rej) || len(rej.Reason) > MaxReasonLen || len(rej.Reason) < MaxReasonLen-1 {
		t.Fatalf("Dial: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// The listener's Accept fails its side on bad options; the dialer is
// rejected and nobody keeps a QP.
func TestAcceptBadOptions(t *testing.T) {
	srv, cli := newNode(t, "server"), newNode(t, "client")
	l := listen(t, srv)
	errc := make(chan error, 1)
	go func() {
		r, err := l.Accept(ctxT(t, 10*time.Second))
		if err == nil {
			o := srv.opts(make([]byte, MaxPrivateData+1))
			_, err = r.Accept(ctxT(t, 10*time.Second), o)
		}
		errc <- err
	}()
	opts := cli.bareOpts(t)
	_, err := Dial(ctxT(t, 10*time.Second), cli.dev, l.Addr(), opts)
	if !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), "private data") {
		t.Fatalf("Dial: %v", err)
	}
	if err := <-errc; !errors.Is(err, ErrPrivateDataTooLarge) {
		t.Fatalf("Accept: %v", err)
	}
	mustDealloc(t, opts.PD)
}

// Dialing a port nobody listens on fails at once.
func TestDialClosedPort(t *testing.T) {
	cli := newNode(t, "client")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	opts := cli.bareOpts(t)
	start := time.Now()
	_, err = Dial(ctxT(t, 10*time.Second), cli.dev, addr, opts)
	if err == nil {
		t.Fatal("Dial to a closed port succeeded")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Dial took %v", d)
	}
	mustDealloc(t, opts.PD)
}

// A listener whose application never accepts: the dialer's deadline and
// cancellation end the dial, and Accept with no dialer ends at its
// deadline.
func TestTimeouts(t *testing.T) {
	srv, cli := newNode(t, "server"), newNode(t, "client")
	l := listen(t, srv)

	opts := cli.bareOpts(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := Dial(ctx, cli.dev, l.Addr(), opts)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Dial with deadline: %v", err)
	}
	mustDealloc(t, opts.PD)

	opts = cli.bareOpts(t)
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err = Dial(ctx, cli.dev, l.Addr(), opts)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Dial: %v", err)
	}
	mustDealloc(t, opts.PD)

	// Drain the two abandoned requests: accepting them fails because
	// their dialers left, and the listener's QPs are destroyed.
	for range 2 {
		r, err := l.Accept(ctxT(t, 5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		o := srv.bareOpts(t)
		if _, err := r.Accept(ctxT(t, 5*time.Second), o); err == nil {
			t.Fatal("Accept of an abandoned request succeeded")
		}
		mustDealloc(t, o.PD)
	}

	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := l.Accept(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Accept: %v", err)
	}
}

// A request the application does not accept within the handshake
// timeout is refused by the listener.
func TestBacklogTimeout(t *testing.T) {
	srv, cli := newNode(t, "server"), newNode(t, "client")
	lc := ListenConfig{HandshakeTimeout: 100 * time.Millisecond, Backlog: 1}
	l, err := lc.Listen(context.Background(), srv.dev, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// The first request fills the backlog; the second waits, then is
	// refused.
	first := make(chan error, 1)
	go func() {
		_, err := Dial(ctxT(t, 10*time.Second), cli.dev, l.Addr(), cli.opts(nil))
		first <- err
	}()
	for deadline := time.Now().Add(5 * time.Second); len(l.reqs) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("first request never queued")
		}
		time.Sleep(time.Millisecond)
	}
	_, err = Dial(ctxT(t, 10*time.Second), cli.dev, l.Addr(), cli.opts(nil))
	var rej *RejectedError
	if !errors.As(err, &rej) || !strings.Contains(rej.Reason, "in time") {
		t.Fatalf("second Dial: %v", err)
	}
	// The first is still queued, never accepted: Close aborts it.
	l.Close()
	if err := <-first; err == nil {
		t.Fatal("first Dial succeeded without an Accept")
	}
}

// Garbage on the side channel fails that exchange with ErrProtocol; the
// listener keeps serving correct dialers.
func TestGarbage(t *testing.T) {
	srv, cli := newNode(t, "server"), newNode(t, "client")
	l := listen(t, srv)
	good, _ := appendMessage(nil, &message{Type: msgREQ, QPN: 1, Transport: "loop", Address: "x"})
	frame := func(f func(b []byte)) []byte {
		b := append([]byte(nil), good...)
		f(b)
		return b
	}
	for _, tc := range []struct {
		name    string
		in      []byte
		wantREJ rejectCode // 0: no reply expected, just a close
	}{
		{"http", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), codeProtocol},
		{"version", frame(func(b []byte) { b[4] = 9 }), codeProtocol},
		{"type", frame(func(b []byte) { b[5] = 77 }), codeProtocol},
		{"reserved", frame(func(b []byte) { b[6] = 1 }), codeProtocol},
		{"huge-length", frame(func(b []byte) { b[8] = 0x7f }), codeProtocol},
		{"rtu-first", func() []byte { b, _ := appendMessage(nil, &message{Type: msgRTU}); return b }(), codeProtocol},
		{"qpn-zero", frame(func(b []byte) { copy(b[12:16], []byte{0, 0, 0, 0}) }), codeProtocol},
		{"address-overrun", frame(func(b []byte) { b[12+4+1+4] = 0xff }), codeProtocol},
		{"trailing", append(frame(func(b []byte) { b[11]++ }), 0), codeProtocol},
		{"wrong-transport", frame(func(b []byte) { copy(b[17:21], "tcp!") }), codeFailed},
		{"truncated", good[:20], 0},
		{"nothing", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", l.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Write(tc.in); err != nil {
				t.Fatal(err)
			}
			if tc.wantREJ == 0 {
				c.(*net.TCPConn).CloseWrite()
				if _, err := c.Read(make([]byte, 1)); err == nil {
					t.Fatal("listener answered a truncated request")
				}
				return
			}
			m, err := readMessage(c)
			if err != nil {
				t.Fatalf("no REJ: %v", err)
			}
			if m.Type != msgREJ || m.Code != tc.wantREJ {
				t.Fatalf("got %+v", m)
			}
			if tc.wantREJ == codeProtocol && !errors.Is(m.err(), ErrProtocol) {
				t.Fatalf("REJ maps to %v", m.err())
			}
			t.Logf("listener said: %v", m.err())
		})
	}
	// Still serving.
	ch := acceptAsync(t, l, srv.opts(nil))
	cc, err := Dial(ctxT(t, 10*time.Second), cli.dev, l.Addr(), cli.opts(nil))
	if err != nil {
		t.Fatal(err)
	}
	cc.Close()
	if r := <-ch; r.err != nil {
		t.Fatal(r.err)
	} else {
		r.c.Close()
	}
}

// A peer that is not a cm listener makes Dial fail with ErrProtocol and
// destroy its QP.
func TestDialNonCMPeer(t *testing.T) {
	cli := newNode(t, "client")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.Write([]byte("SSH-2.0-OpenSSH_9.6\r\n"))
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		c.Read(make([]byte, 8192))
	}()
	opts := cli.bareOpts(t)
	_, err = Dial(ctxT(t, 10*time.Second), cli.dev, ln.Addr().String(), opts)
	if !errors.Is(err, ErrProtocol) {
		t.Fatalf("Dial: %v", err)
	}
	mustDealloc(t, opts.PD)
}

// Oversized private data and missing options are refused before any
// network traffic.
func TestDialBadOptions(t *testing.T) {
	srv, cli := newNode(t, "server"), newNode(t, "client")
	l := listen(t, srv)
	_, err := Dial(ctxT(t, 10*time.Second), cli.dev, l.Addr(), cli.opts(make([]byte, MaxPrivateData+1)))
	if !errors.Is(err, ErrPrivateDataTooLarge) || !errors.Is(err, verbs.ErrInvalidArg) {
		t.Fatalf("oversized private data: %v", err)
	}
	_, err = Dial(ctxT(t, 10*time.Second), cli.dev, l.Addr(), Options{PD: cli.pd})
	if !errors.Is(err, verbs.ErrInvalidArg) {
		t.Fatalf("no CQs: %v", err)
	}
	o := cli.opts(nil)
	o.Access = verbs.AccessRemoteWrite // without LocalWrite
	if _, err = Dial(ctxT(t, 10*time.Second), cli.dev, l.Addr(), o); !errors.Is(err, verbs.ErrAccess) {
		t.Fatalf("bad access: %v", err)
	}
	if len(l.reqs) != 0 {
		t.Fatal("a refused Dial reached the listener")
	}
}

// Many dialers at once, each on its own device: every connection works
// and gets its own private data.
func TestConcurrentDials(t *testing.T) {
	const n = 32
	srv := newNode(t, "server")
	l := listen(t, srv)
	srvDesc := EncodeDescs([]MRDesc{DescOf(srv.mr)})
	for i := range n {
		srv.mr.Bytes()[i] = byte(i + 1)
	}

	var conns sync.Map
	serverErr := make(chan error, n)
	var swg sync.WaitGroup
	defer swg.Wait()
	swg.Add(1)
	go func() {
		defer swg.Done()
		for range n {
			r, err := l.Accept(ctxT(t, 20*time.Second))
			if err != nil {
				serverErr <- err
				return
			}
			swg.Add(1)
			go func() {
				defer swg.Done()
				c, err := r.Accept(ctxT(t, 20*time.Second), srv.opts(append(srvDesc, r.PrivateData()...)))
				if err == nil {
					conns.Store(c, true)
				}
				serverErr <- err
			}()
		}
	}()

	var wg sync.WaitGroup
	clientErr := make(chan error, n)
	for i := range n {
		cli := newNode(t, "client"+string(rune('A'+i)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			me := []byte{byte(i)}
			c, err := Dial(ctxT(t, 20*time.Second), cli.dev, l.Addr(), cli.opts(me))
			if err != nil {
				clientErr <- err
				return
			}
			defer c.Close()
			pd := c.PeerPrivateData()
			if len(pd) != len(srvDesc)+1 || pd[len(pd)-1] != byte(i) {
				clientErr <- errors.New("private data of another connection")
				return
			}
			descs, err := DecodeDescs(pd[:len(srvDesc)])
			if err != nil {
				clientErr <- err
				return
			}
			// READ my byte of the server's region.
			err = c.QP().PostSend([]verbs.SendWR{{Opcode: verbs.OpRead, Flags: verbs.FlagSignaled,
				SGL:        []verbs.SGE{{Addr: cli.mr.Addr(), Length: 1, LKey: cli.mr.LKey()}},
				RemoteAddr: descs[0].Addr + uint64(i), RKey: descs[0].RKey}})
			if err != nil {
				clientErr <- err
				return
			}
			wc := make([]verbs.WC, 1)
			if _, err := verbs.PollWait(ctxT(t, 10*time.Second), cli.cq, wc, verbs.PollAdaptive); err != nil {
				clientErr <- err
				return
			}
			if wc[0].Status != verbs.StatusSuccess || cli.mr.Bytes()[0] != byte(i+1) {
				clientErr <- errors.New("READ over the connection failed")
				return
			}
			clientErr <- nil
		}()
	}
	wg.Wait()
	for range n {
		if err := <-clientErr; err != nil {
			t.Error("client:", err)
		}
	}
	for range n {
		if err := <-serverErr; err != nil {
			t.Error("server:", err)
		}
	}
	count := 0
	conns.Range(func(k, _ any) bool { count++; k.(*Conn).Close(); return true })
	if count != n {
		t.Errorf("%d server connections, want %d", count, n)
	}
}

// Close stops the accept loop, aborts pending exchanges, fails later
// Accepts and leaks no goroutine.
func TestCloseNoLeak(t *testing.T) {
	srv, cli := newNode(t, "server"), newNode(t, "client")
	base := runtime.NumGoroutine()

	l, err := Listen(context.Background(), srv.dev, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// A silent side-channel connection (handshake in progress), a queued
	// request, and one returned by Accept but not answered.
	silent, err := net.Dial("tcp", l.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	dials := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := Dial(ctxT(t, 10*time.Second), cli.dev, l.Addr(), cli.opts(nil))
			dials <- err
		}()
	}
	held, err := l.Accept(ctxT(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); len(l.reqs) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("second request never queued")
		}
		time.Sleep(time.Millisecond)
	}

	accepting := make(chan error, 1)
	go func() {
		_, err := l.Accept(context.Background())
		accepting <- err
	}()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_ = accepting // may have taken the queued request or seen ErrClosed
	for range 2 {
		if err := <-dials; err == nil {
			t.Fatal("a Dial succeeded against a closed listener")
		}
	}
	if _, err := held.Accept(ctxT(t, 5*time.Second), srv.opts(nil)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Accept of a held request after Close: %v", err)
	}
	if _, err := l.Accept(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Accept after Close: %v", err)
	}
	silent.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := silent.Read(make([]byte, 1)); err == nil {
		t.Fatal("silent connection still open")
	}
	if _, err := Dial(ctxT(t, 5*time.Second), cli.dev, l.Addr(), cli.opts(nil)); err == nil {
		t.Fatal("Dial after Close succeeded")
	}

	var n int
	for deadline := time.Now().Add(5 * time.Second); ; {
		if n = runtime.NumGoroutine(); n <= base {
			break
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before Listen:\n%s", n, base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
