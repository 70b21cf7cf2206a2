package sockd

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/sock"
)

// TestAbandonedAdmitReleased: when a listener gives up on an ADMIT (its
// context ends) and the daemon admits the connection afterwards, the
// client releases it, or the count would leak until the listener closes.
func TestAbandonedAdmitReleased(t *testing.T) {
	name := "@rdmakit-sockd-slow-" + shmURI()[6:]
	ln, err := net.Listen("unix", name)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	gaveUp := make(chan struct{})
	got := make(chan msg, 1)
	fail := make(chan error, 1)
	go func() { // a daemon that answers ADMIT late
		c, err := ln.Accept()
		if err != nil {
			fail <- err
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		reg, err := readMsg(c, nil, maxFrame)
		if err != nil {
			fail <- err
			return
		}
		c.Write((&msg{typ: msgOK, id: reg.id}).encode(nil))
		adm, err := readMsg(c, nil, maxFrame)
		if err != nil {
			fail <- err
			return
		}
		<-gaveUp
		c.Write((&msg{typ: msgAdmitted, id: adm.id, part: 1}).encode(nil))
		rel, err := readMsg(c, nil, maxFrame)
		if err != nil {
			fail <- err
			return
		}
		got <- rel
	}()
	cp := &Client{Unix: name}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addr := sock.Addr{Transport: "shm", Host: "slow"}
	unreg, err := cp.Register(ctx, sock.ListenerInfo{Addr: addr, App: "db", PID: os.Getpid(), Partitions: 2, RingSize: 1 << 16, MTU: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer unreg()
	actx, acancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, err = cp.Admit(actx, addr, "web", 2)
	acancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Admit: %v, want the deadline", err)
	}
	close(gaveUp)
	select {
	case m := <-got:
		if m.typ != msgRelease || m.app != "web" || m.part != 1 || m.count != 1 {
			t.Fatalf("after the late ADMITTED the client sent %+v, want RELEASE web 1 ×1", m)
		}
	case err := <-fail:
		t.Fatal(err)
	case <-ctx.Done():
		t.Fatal("no RELEASE after the late ADMITTED")
	}
}
