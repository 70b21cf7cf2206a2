package sherman_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/rdmakit/rdmakit/btree/sherman"
)

// TestRoundTrips: with a warm index cache a Get is one READ of the leaf
// and an update three round trips (lock, READ, write-back with the
// unlock), as doc.go says.
func TestRoundTrips(t *testing.T) {
	ctx := context.Background()
	b := newBed(t, 1, 16<<20)
	cfg := sherman.Config{Layout: sherman.Layout{KeySize: 16, ValueSize: 16, LeafSlots: 8, InnerSlots: 8}}
	w := b.client(t, cfg)
	const n = 1000
	key := func(i int) []byte { return fmt.Appendf(nil, "k%05d", i) }
	for i := range n {
		if err := w.Put(ctx, key(i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	c := b.client(t, cfg)
	for i := range n { // warms the cache
		if _, err := c.Get(ctx, key(i), nil); err != nil {
			t.Fatal(err)
		}
	}
	t0 := c.Stats().RoundTrips
	for i := range n {
		if _, err := c.Get(ctx, key(i), nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.Stats().RoundTrips - t0; got != n {
		t.Fatalf("%d warm Gets took %d round trips", n, got)
	}
	t0 = c.Stats().RoundTrips
	for i := range n {
		if err := c.Put(ctx, key(i), []byte("w")); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.Stats().RoundTrips - t0; got != 3*n {
		t.Fatalf("%d updates took %d round trips", n, got)
	}
}
