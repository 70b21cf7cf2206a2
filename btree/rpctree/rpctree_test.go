package rpctree_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/btree"
	"github.com/rdmakit/rdmakit/btree/btreetest"
	"github.com/rdmakit/rdmakit/btree/rpctree"
	"github.com/rdmakit/rdmakit/memnode"

	_ "github.com/rdmakit/rdmakit/transport/loop"
)

var fabrics atomic.Int64

// serve starts an RPC tree server on a loop fabric of its own and
// returns a function dialing clients to it.
func serve(t *testing.T) func() *rpctree.Client {
	t.Helper()
	fabric := fmt.Sprintf("rpctree-%d", fabrics.Add(1))
	srv, err := memnode.Start(context.Background(), memnode.Config{Device: "loop://" + fabric + "/srv", CM: "127.0.0.1:0",
		Token: "t", NewService: rpctree.NewService, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	n := 0
	return func() *rpctree.Client {
		n++
		c, err := rpctree.Dial(context.Background(), rpctree.DialConfig{Device: fmt.Sprintf("loop://%s/c%d", fabric, n),
			Node: srv.Info().CM, Token: "t"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
}

func TestOracle(t *testing.T) {
	dial := serve(t)
	btreetest.Oracle(t, dial(), 4000, 300, 1)
}

// TestScanPages: a scan longer than one message's page is continued
// from just after the last key, none lost or repeated.
func TestScanPages(t *testing.T) {
	c := serve(t)()
	ctx := context.Background()
	for i := range 500 {
		if err := c.Put(ctx, []byte(fmt.Sprintf("p%04d", i)), make([]byte, 200)); err != nil {
			t.Fatal(err)
		}
	}
	before := c.Stats().RoundTrips
	it := c.Scan(ctx, nil, nil, 0)
	n := 0
	for it.Next() {
		if want := fmt.Sprintf("p%04d", n); string(it.Key()) != want {
			t.Fatalf("key %d = %q, want %q", n, it.Key(), want)
		}
		n++
	}
	if it.Err() != nil || n != 500 {
		t.Fatalf("%d keys, %v", n, it.Err())
	}
	if trips := c.Stats().RoundTrips - before; trips < 2 {
		t.Fatalf("500 × 200 B in %d page(s)", trips)
	}
}

func TestLinearizable(t *testing.T) {
	dial := serve(t)
	btreetest.Linearizable(t, []btree.Tree{dial(), dial(), dial()}, 4, 12000, 48)
}

func TestErrors(t *testing.T) {
	c := serve(t)()
	ctx := context.Background()
	if err := c.Put(ctx, nil, []byte("v")); !errors.Is(err, btree.ErrTooLarge) {
		t.Fatalf("empty key: %v", err)
	}
	if err := c.Put(ctx, []byte("k"), make([]byte, btree.MaxValue+1)); !errors.Is(err, btree.ErrTooLarge) {
		t.Fatalf("large value: %v", err)
	}
	if _, err := c.Get(ctx, []byte("none"), nil); !errors.Is(err, btree.ErrNotFound) {
		t.Fatalf("missing key: %v", err)
	}
	c.Close()
	if _, err := c.Get(ctx, []byte("k"), nil); !errors.Is(err, btree.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

// TestNotAnRPCTree: a client that reaches a plain memory node (no
// token: it admits any hello) fails at once with ErrLayout.
func TestNotAnRPCTree(t *testing.T) {
	ctx := context.Background()
	srv, err := memnode.Start(ctx, memnode.Config{Device: "loop://rpctree-plain/srv", CM: "127.0.0.1:0", Memory: 1 << 20,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c, err := rpctree.Dial(ctx, rpctree.DialConfig{Device: "loop://rpctree-plain/c", Node: srv.Info().CM})
	if !errors.Is(err, btree.ErrLayout) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("dialing a memory node: %v", err)
	}
}

// TestCancelAndServerGone: an operation whose context is cancelled
// returns its context's error at once and leaves the client usable; a
// server that goes away under four busy clients fails their operations
// with ErrUnreachable well before the callers' deadlines (3 s each) — a
// call whose request reached the server before it went away learns of it
// from the rpc client's liveness probe — and Close returns.
func TestCancelAndServerGone(t *testing.T) {
	fabric := fmt.Sprintf("rpctree-%d", fabrics.Add(1))
	srv, err := memnode.Start(context.Background(), memnode.Config{Device: "loop://" + fabric + "/srv", CM: "127.0.0.1:0",
		Token: "t", NewService: rpctree.NewService, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var clients []*rpctree.Client
	for i := range 4 {
		c, err := rpctree.Dial(context.Background(), rpctree.DialConfig{Device: fmt.Sprintf("loop://%s/c%d", fabric, i),
			Node: srv.Info().CM, Token: "t"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := clients[0].Put(ctx, []byte("k"), []byte("v")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Put with a cancelled context: %v, want context.Canceled", err)
	}
	if err := clients[0].Put(context.Background(), []byte("k"), []byte("v")); err != nil {
		t.Fatalf("Put after a cancelled one: %v", err)
	}
	errs := make(chan error, len(clients))
	for i, c := range clients {
		go func() {
			for n := 0; ; n++ {
				octx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				err := c.Put(octx, []byte(fmt.Sprint(i, n%64)), []byte("v"))
				cancel()
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	t0 := time.Now()
	srv.Close()
	for range clients {
		select {
		case err := <-errs:
			if !errors.Is(err, btree.ErrUnreachable) {
				t.Errorf("after the server went away: %v, want ErrUnreachable", err)
			}
		case <-time.After(2500 * time.Millisecond):
			t.Fatal("an operation still waits 2.5 s after the server went away (the probe every 500 ms should have found it gone)")
		}
	}
	t.Logf("every client failed within %v of the server's end", time.Since(t0).Round(time.Millisecond))
	done := make(chan struct{})
	go func() {
		for _, c := range clients {
			c.Close()
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hangs after the server went away")
	}
}
