package sherman_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/rdmakit/rdmakit/btree"
	"github.com/rdmakit/rdmakit/btree/sherman"
)

func TestPutGetDeleteScan(t *testing.T) {
	for _, nodes := range []int{1, 2} {
		t.Run(fmt.Sprint(nodes, "nodes"), func(t *testing.T) {
			ctx := context.Background()
			b := newBed(t, nodes, 4<<20)
			c := b.client(t, sherman.Config{Layout: small})
			const n = 500
			for i := range n {
				k := fmt.Appendf(nil, "k%05d", (i*7919)%n)
				if err := c.Put(ctx, k, fmt.Appendf(nil, "v%d", (i*7919)%n)); err != nil {
					t.Fatal(err)
				}
			}
			if c.Stats().Splits == 0 {
				t.Fatal("no splits")
			}
			c2 := b.client(t, sherman.Config{Layout: small}) // a cold cache
			for i := range n {
				v, err := c2.Get(ctx, fmt.Appendf(nil, "k%05d", i), nil)
				if err != nil || string(v) != fmt.Sprint("v", i) {
					t.Fatalf("get %d: %q %v", i, v, err)
				}
			}
			for i := 0; i < n; i += 2 {
				if err := c2.Delete(ctx, fmt.Appendf(nil, "k%05d", i)); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := c.Get(ctx, []byte("k00002"), nil); !errors.Is(err, btree.ErrNotFound) {
				t.Fatalf("deleted key: %v", err)
			}
			it := c.Scan(ctx, []byte("k00100"), []byte("k00200"), 0)
			want := 101
			for it.Next() {
				if string(it.Key()) != fmt.Sprintf("k%05d", want) || string(it.Value()) != fmt.Sprint("v", want) {
					t.Fatalf("scan: %q=%q, want k%05d", it.Key(), it.Value(), want)
				}
				want += 2
			}
			if err := it.Err(); err != nil || want != 201 {
				t.Fatalf("scan ended at %d: %v", want, err)
			}
			it = c.Scan(ctx, nil, nil, 10)
			got := 0
			for it.Next() {
				got++
			}
			if got != 10 {
				t.Fatalf("limit 10: %d keys", got)
			}
		})
	}
}

func TestLimits(t *testing.T) {
	ctx := context.Background()
	b := newBed(t, 1, 1<<20)
	c := b.client(t, sherman.Config{Layout: small})
	if err := c.Put(ctx, make([]byte, 17), nil); !errors.Is(err, btree.ErrTooLarge) {
		t.Fatalf("long key: %v", err)
	}
	if err := c.Put(ctx, []byte("k"), make([]byte, 17)); !errors.Is(err, btree.ErrTooLarge) {
		t.Fatalf("long value: %v", err)
	}
	if err := c.Put(ctx, nil, nil); !errors.Is(err, btree.ErrTooLarge) {
		t.Fatalf("empty key: %v", err)
	}
	if _, err := sherman.Open(ctx, b.pd, dial(t, b.dev, b.pd, b.nodes, 4), sherman.Config{Layout: sherman.Layout{KeySize: 8}}); !errors.Is(err, btree.ErrLayout) {
		t.Fatalf("another layout: %v", err)
	}
	c.Close()
	if err := c.Put(ctx, []byte("k"), nil); !errors.Is(err, btree.ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
}
