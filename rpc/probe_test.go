package rpc_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/rpc"
)

// TestProbeFindsGoneServer: a call whose request the server took, and
// whose server then went away (its device closed, as when its process
// dies) fails within a few probe intervals, not at its caller's
// deadline; with probing off (the negative control) it waits for the
// deadline. A handler slower than the probe interval on a live server is
// answered, and one that holds a call past its caller's deadline ends
// that call by the deadline and leaves the connection up: the probe is
// not a call timeout.
func TestProbeFindsGoneServer(t *testing.T) {
	for _, scheme := range []string{"loop", "tcp"} {
		t.Run(scheme, func(t *testing.T) {
			slow := probeServer(t, scheme, 50*time.Millisecond)
			resp := make([]byte, 8)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if n, err := slow.c.Call(ctx, methodHold, []byte("x"), resp); err != nil || string(resp[:n]) != "x" {
				t.Fatalf("a handler slower than the probe interval on a live server: %q, %v", resp[:n], err)
			}

			// A live server that does not answer within the caller's
			// deadline (its handler holds the call): the probes succeed,
			// the call ends by its deadline, the connection stays up.
			mute := probeServer(t, scheme, 20*time.Millisecond)
			short, cancelShort := context.WithTimeout(context.Background(), 150*time.Millisecond)
			defer cancelShort()
			if _, err := mute.c.Call(short, methodHold, []byte("y"), resp); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("a live server that holds the call past the deadline: %v, want the deadline", err)
			}
			<-mute.taken
			if n, err := mute.c.Call(ctx, methodHold, []byte("z"), resp); err != nil || string(resp[:n]) != "z" {
				t.Fatalf("after a call the server held past its deadline: %q, %v (the probes must not have failed the connection)", resp[:n], err)
			}

			gone := probeServer(t, scheme, 50*time.Millisecond)
			took, err := gone.callThenKill(t, 10*time.Second)
			if err == nil || errors.Is(err, context.DeadlineExceeded) || took > 3*time.Second {
				t.Fatalf("a call to a server gone after taking it: %v after %v, want a connection error within 3 s", err, took)
			}
			t.Logf("the call failed %v after the server went: %v", took, err)

			off := probeServer(t, scheme, -1)
			took, err = off.callThenKill(t, 1500*time.Millisecond)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("probing off: %v after %v, want the caller's deadline", err, took)
			}
		})
	}
}

// methodHold's handler answers when its server's release channel says.
const methodHold = 7

type probed struct {
	c       *rpc.Client
	taken   chan struct{}
	release chan struct{}
	kill    func()
}

// probeServer serves methodHold (which waits for release, or 300 ms)
// and returns a client with probe interval probe.
func probeServer(t *testing.T, scheme string, probe time.Duration) *probed {
	cl, sv := pair(t, scheme)
	p := &probed{taken: make(chan struct{}, 1), release: make(chan struct{})}
	srv := newServer()
	srv.Handle(methodHold, func(req, resp []byte) (int, error) {
		p.taken <- struct{}{}
		select {
		case <-p.release:
		case <-time.After(300 * time.Millisecond):
		}
		return copy(resp, req), nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { srv.Serve(ctx, sv.pd, sv.qp, sv.cq); close(served) }()
	c, err := rpc.NewClient(cl.pd, cl.qp, cl.cq, rpc.ClientConfig{Probe: probe})
	if err != nil {
		t.Fatal(err)
	}
	p.c = c
	p.kill = func() { sv.dev.Close() }
	t.Cleanup(func() {
		c.Close()
		cancel()
		close(p.release)
		<-served
	})
	return p
}

// callThenKill calls methodHold, closes the server's device once the
// handler has the call (and holds it), and returns how long the call
// took from then and its error.
func (p *probed) callThenKill(t *testing.T, deadline time.Duration) (time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := p.c.Call(ctx, methodHold, []byte("x"), make([]byte, 8))
		errc <- err
	}()
	select {
	case <-p.taken:
	case <-time.After(5 * time.Second):
		t.Fatal("the handler never got the call")
	}
	t0 := time.Now()
	p.kill()
	err := <-errc
	return time.Since(t0), err
}
