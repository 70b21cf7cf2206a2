package peers

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/btree"
	"github.com/rdmakit/rdmakit/btree/btreetest"
)

// startRedisTree starts Redis (skipping without it) and dials a tree
// of conns connections.
func startRedisTree(t *testing.T, conns int) (*RedisTree, *Server) {
	need(t, "redis-server", "redis")
	srv, err := StartRedis(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	tr, err := DialRedisTree(t.Context(), srv.Addr, "tree", conns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr, srv
}

// TestRedisTreeOracle: gets, updates (the old member goes), deletes and
// scans of every bound and limit agree with a sorted map; scans longer
// than a page go on from the page's last member.
func TestRedisTreeOracle(t *testing.T) {
	tr, _ := startRedisTree(t, 1)
	btreetest.Oracle(t, tr, 3000, 40, 2)
	if s := tr.Stats(); s.RoundTrips < 3000 || s.BytesRead == 0 {
		t.Fatalf("stats %+v after 3000 operations", s)
	}
}

// TestRedisTreeLinearizable: concurrent Puts (MULTI/EXEC), Deletes and
// Gets from two trees of 4 connections each are linearizable.
func TestRedisTreeLinearizable(t *testing.T) {
	a, srv := startRedisTree(t, 4)
	b, err := DialRedisTree(t.Context(), srv.Addr, "tree", 4)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	btreetest.Linearizable(t, []btree.Tree{a, b}, 4, 6000, 32)
}

// TestRedisTreeErrors: keys with NUL and 0x01 bytes, a missing key and
// a closed tree.
func TestRedisTreeErrors(t *testing.T) {
	tr, _ := startRedisTree(t, 1)
	ctx := t.Context()
	// Keys with the escaped bytes keep their order and their values.
	keys := []string{"a", "a\x00", "a\x00\x00", "a\x01", "a\x01\x02", "a\x02", "b"}
	for i := len(keys) - 1; i >= 0; i-- {
		if err := tr.Put(ctx, []byte(keys[i]), []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	it := tr.Scan(ctx, []byte("a\x00"), []byte("a\x02"), 0)
	for i := 1; i < 5; i++ {
		if !it.Next() || string(it.Key()) != keys[i] || it.Value()[0] != byte(i) {
			t.Fatalf("scan %d: %q %v %v", i, it.Key(), it.Value(), it.Err())
		}
	}
	if it.Next() || it.Err() != nil {
		t.Fatalf("scan past a\\x02: %q %v", it.Key(), it.Err())
	}
	if v, err := tr.Get(ctx, []byte("a\x00"), nil); err != nil || v[0] != 1 {
		t.Fatalf("get a\\x00: %v %v", v, err)
	}
	if _, err := tr.Get(ctx, []byte("none"), nil); !errors.Is(err, btree.ErrNotFound) {
		t.Fatalf("missing key: %v", err)
	}
	tr.Close()
	if err := tr.Put(ctx, []byte("k"), nil); !errors.Is(err, btree.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

// TestRedisTreeServerKilled: Redis SIGKILLed under four busy clients:
// every operation fails within seconds (none hangs), and Close returns.
func TestRedisTreeServerKilled(t *testing.T) {
	tr, srv := startRedisTree(t, 4)
	errs := make(chan error, 4)
	for i := range 4 {
		go func() {
			for n := 0; ; n++ {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				err := tr.Put(ctx, []byte(fmt.Sprint(i, n%64)), []byte("v"))
				cancel()
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	if err := syscall.Kill(srv.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		select {
		case err := <-errs:
			if errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("an operation waited out its 30 s context: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("an operation still waits 10 s after Redis was killed")
		}
	}
	done := make(chan struct{})
	go func() { tr.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hangs after Redis was killed")
	}
}
