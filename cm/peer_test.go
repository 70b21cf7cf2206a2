package cm

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

// fakeListener accepts one side-channel connection, reads the REQ and
// answers with reply; it returns what the dialer sent after the reply.
func fakeListener(t *testing.T, reply func(req message) message) (addr string, after <-chan message) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ch := make(chan message, 1)
	go func() {
		defer close(ch)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		req, err := readMessage(c)
		if err != nil {
			return
		}
		rep := reply(req)
		if writeMessage(c, &rep) != nil {
			return
		}
		if m, err := readMessage(c); err == nil {
			ch <- m
		}
	}()
	return ln.Addr().String(), ch
}

// The dialer refuses bad replies, tells the listener why, and destroys
// its QP.
func TestDialerRefusesBadReply(t *testing.T) {
	cli := newNode(t, "client")
	for _, tc := range []struct {
		name    string
		reply   func(req message) message
		want    error
		wantREJ rejectCode
	}{
		{"other-transport", func(req message) message {
			return message{Type: msgREP, QPN: 5, Transport: "tcp", Address: "tcp://10.0.0.1:1"}
		}, verbs.ErrInvalidArg, codeFailed},
		{"unknown-device", func(req message) message {
			return message{Type: msgREP, QPN: 5, Transport: req.Transport, Address: "loop://nowhere/none"}
		}, verbs.ErrInvalidArg, codeFailed},
		{"another-REQ", func(req message) message { return req }, ErrProtocol, codeProtocol},
		{"RTU", func(message) message { return message{Type: msgRTU} }, ErrProtocol, codeProtocol},
		{"protocol-REJ", func(message) message {
			return message{Type: msgREJ, Code: codeProtocol, Reason: "you are speaking nonsense"}
		}, ErrProtocol, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, after := fakeListener(t, tc.reply)
			opts := cli.bareOpts(t)
			_, err := Dial(ctxT(t, 5*time.Second), cli.dev, addr, opts)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Dial: %v, want %v", err, tc.want)
			}
			mustDealloc(t, opts.PD)
			m, ok := <-after
			if tc.wantREJ == 0 {
				return
			}
			if !ok || m.Type != msgREJ || m.Code != tc.wantREJ {
				t.Fatalf("listener got %+v (%v)", m, ok)
			}
		})
	}
}

// fakeDial sends a REQ for qp over a raw side channel and returns the
// connection.
func fakeDial(t *testing.T, l *Listener, dev verbs.Device, qpn uint32) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", l.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := writeMessage(c, &message{Type: msgREQ, QPN: qpn, Transport: dev.Attr().Transport, Address: dev.Address()}); err != nil {
		t.Fatal(err)
	}
	return c
}

// Request.Accept fails — and destroys its QP — when the dialer answers
// the REP with a REJ, with garbage, or not at all.
func TestAcceptDialerFails(t *testing.T) {
	srv, cli := newNode(t, "server"), newNode(t, "client")
	l := listen(t, srv)
	qp, err := cli.pd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: cli.cq, RecvCQ: cli.cq})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		answer func(c net.Conn)
		want   error
	}{
		{"REJ", func(c net.Conn) {
			writeMessage(c, &message{Type: msgREJ, Code: codeFailed, Reason: "dialer: QP → RTR failed"})
		}, ErrRejected},
		{"garbage", func(c net.Conn) { c.Write([]byte("garbage garbage garbage")) }, ErrProtocol},
		{"REQ", func(c net.Conn) {
			writeMessage(c, &message{Type: msgREQ, QPN: 1, Transport: "loop", Address: "x"})
		}, ErrProtocol},
		{"hang-up", func(c net.Conn) { c.Close() }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fakeDial(t, l, cli.dev, qp.QPN())
			r, err := l.Accept(ctxT(t, 5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			o := srv.bareOpts(t)
			go func() {
				_, err := r.Accept(ctxT(t, 5*time.Second), o)
				done <- err
			}()
			rep, err := readMessage(c)
			if err != nil || rep.Type != msgREP || rep.Address != srv.dev.Address() {
				t.Fatalf("reply %+v, %v", rep, err)
			}
			tc.answer(c)
			err = <-done
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("Accept: %v, want %v", err, tc.want)
			}
			if tc.want == ErrRejected && !strings.Contains(err.Error(), "RTR failed") {
				t.Fatalf("reason lost: %v", err)
			}
			mustDealloc(t, o.PD)
		})
	}
}

// A request naming a device the listener cannot reach is refused with the
// listener's reason; the listener's QP is destroyed.
func TestAcceptUnreachableDialer(t *testing.T) {
	srv := newNode(t, "server")
	l := listen(t, srv)
	c, err := net.Dial("tcp", l.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := writeMessage(c, &message{Type: msgREQ, QPN: 9, Transport: "loop", Address: "loop://nowhere/ghost"}); err != nil {
		t.Fatal(err)
	}
	r, err := l.Accept(ctxT(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	o := srv.bareOpts(t)
	if _, err := r.Accept(ctxT(t, 5*time.Second), o); !errors.Is(err, verbs.ErrInvalidArg) {
		t.Fatalf("Accept: %v", err)
	}
	mustDealloc(t, o.PD)
	m, err := readMessage(c)
	if err != nil || m.Type != msgREJ || m.Code != codeFailed || !errors.Is(m.err(), ErrRejected) || !strings.Contains(m.Reason, "RTR") {
		t.Fatalf("dialer got %+v, %v", m, err)
	}
}
