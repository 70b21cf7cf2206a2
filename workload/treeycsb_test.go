package workload_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/btree"
	"github.com/rdmakit/rdmakit/btree/rpctree"
	"github.com/rdmakit/rdmakit/memnode"
	"github.com/rdmakit/rdmakit/workload"

	_ "github.com/rdmakit/rdmakit/transport/loop"
)

// TestTreeYCSB loads an RPC tree, checks that every record is there
// under its 8-byte key in key order, and runs A, C and E on it.
func TestTreeYCSB(t *testing.T) {
	ctx := context.Background()
	srv, err := memnode.Start(ctx, memnode.Config{Device: "loop://treeycsb/srv", CM: "127.0.0.1:0",
		NewService: rpctree.NewService, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c, err := rpctree.Dial(ctx, rpctree.DialConfig{Device: "loop://treeycsb/c", Node: srv.Info().CM})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	y := workload.TreeYCSB{Workload: "e", Records: 2000, Threads: 4, Duration: 200 * time.Millisecond}
	if err := y.Load(ctx, []btree.Tree{c, c, c}); err != nil {
		t.Fatal(err)
	}
	it := c.Scan(ctx, nil, nil, 0)
	var n int
	var last []byte
	for it.Next() {
		if len(it.Key()) != 8 || len(it.Value()) != 8 || string(it.Key()) <= string(last) {
			t.Fatalf("key %x (after %x), value %x", it.Key(), last, it.Value())
		}
		last = append(last[:0], it.Key()...)
		n++
	}
	if it.Err() != nil || n != 2000 {
		t.Fatalf("%d records, %v", n, it.Err())
	}
	for _, w := range []string{"a", "c", "e"} {
		y.Workload = w
		r, err := y.Run(ctx, []btree.Tree{c})
		if err != nil || r.Ops == 0 || r.Errors != 0 {
			t.Fatalf("workload %s: %+v, %v", w, r, err)
		}
	}
	if err := (&workload.TreeYCSB{Workload: "d", Records: 1}).Load(ctx, []btree.Tree{c}); err == nil {
		t.Fatal("workload d accepted")
	}
}

// scanCounter is a tree that records the limits of its scans and the
// keys they returned, and counts writes.
type scanCounter struct {
	btree.Tree
	mu           sync.Mutex
	limits, keys map[int]int // scans by limit; scans by keys returned
	writes       int
}

func (s *scanCounter) Put(ctx context.Context, k, v []byte) error {
	s.mu.Lock()
	s.writes++
	s.mu.Unlock()
	return s.Tree.Put(ctx, k, v)
}

func (s *scanCounter) Scan(ctx context.Context, from, to []byte, limit int) btree.Iterator {
	return &countingIter{Iterator: s.Tree.Scan(ctx, from, to, limit), s: s, limit: limit}
}

// countingIter counts its keys and records them in its scanCounter at
// Close.
type countingIter struct {
	btree.Iterator
	s        *scanCounter
	limit, n int
}

func (it *countingIter) Next() bool {
	ok := it.Iterator.Next()
	if ok {
		it.n++
	}
	return ok
}

func (it *countingIter) Close() error {
	it.s.mu.Lock()
	it.s.limits[it.limit]++
	it.s.keys[it.n]++
	it.s.mu.Unlock()
	return it.Iterator.Close()
}

// TestTreeYCSBScan: workload "scan" only scans, every scan asks for
// ScanLength keys and, but for the few that start near the end of the
// key space, gets them all.
func TestTreeYCSBScan(t *testing.T) {
	ctx := context.Background()
	srv, err := memnode.Start(ctx, memnode.Config{Device: "loop://treeycsb-scan/srv", CM: "127.0.0.1:0",
		NewService: rpctree.NewService, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c, err := rpctree.Dial(ctx, rpctree.DialConfig{Device: "loop://treeycsb-scan/c", Node: srv.Info().CM})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	y := workload.TreeYCSB{Workload: "scan", Records: 2000, ScanLength: 40, Threads: 2, Duration: 100 * time.Millisecond}
	if err := y.Load(ctx, []btree.Tree{c, c}); err != nil {
		t.Fatal(err)
	}
	sc := &scanCounter{Tree: c, limits: map[int]int{}, keys: map[int]int{}}
	r, err := y.Run(ctx, []btree.Tree{sc})
	if err != nil || r.Ops == 0 || r.Errors != 0 {
		t.Fatalf("%+v, %v", r, err)
	}
	if sc.writes != 0 || len(sc.limits) != 1 || sc.limits[40] == 0 {
		t.Fatalf("%d writes, scans by limit %v", sc.writes, sc.limits)
	}
	full := sc.keys[40]
	if total := sc.limits[40]; full < total*9/10 {
		t.Fatalf("%d of %d scans returned 40 keys: %v", full, total, sc.keys)
	}
}
