package sock

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/nettest"
)

var testSeq atomic.Int64

// testURI returns a fresh listening URI on transport.
func testURI(t testing.TB, transport string) string {
	if transport == "shm" {
		return fmt.Sprintf("shm://t%d-%d", time.Now().UnixNano()%1e6, testSeq.Add(1))
	}
	return "tcp://127.0.0.1:0"
}

// pipe returns a connected pair: the dialed end and the accepted end.
func pipe(t testing.TB, cfg Config, transport string) (*Conn, *Conn, func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ln, err := cfg.Listen(ctx, testURI(t, transport))
	if err != nil {
		t.Fatal(err)
	}
	d := &Dialer{Config: cfg}
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := ln.Accept()
		ch <- res{c, err}
	}()
	c1, err := d.Dial(ctx, ln.Addr().String())
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	return c1, r.c.(*Conn), func() { ln.Close() }
}

func TestNettestConn(t *testing.T) {
	for _, tr := range []string{"shm", "tcp"} {
		for _, mode := range []Mode{Direct, SP2C, SPSC} {
			t.Run(tr+"/"+mode.String(), func(t *testing.T) {
				cfg := Config{Mode: mode}
				nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
					a, b, done := pipe(t, cfg, tr)
					return a, b, func() { a.Close(); b.Close(); done() }, nil
				})
			})
		}
	}
}
