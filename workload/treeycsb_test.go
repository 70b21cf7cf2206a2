package workload_test

import (
	"context"
	"log/slog"
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
