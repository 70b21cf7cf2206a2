package prismkv_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/kv"
	"github.com/rdmakit/rdmakit/kv/kvtest"
	"github.com/rdmakit/rdmakit/kv/prismkv"
	_ "github.com/rdmakit/rdmakit/transport/tcp"
	"github.com/rdmakit/rdmakit/verbs"
)

// node starts a PRISM-KV node on a new bed and returns clients to it.
func node(t *testing.T, scheme string, cfg prismkv.Config, clients int) (*kvtest.Bed, *prismkv.Server, []*prismkv.Client) {
	t.Helper()
	b := kvtest.NewBed(t, scheme)
	srv, err := prismkv.NewServer(b.NodePD, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() }) // after the bed's cleanup stopped the serving
	cs := kvtest.Clients(t, b, clients, 256, 128, srv, func(ctx context.Context, pd verbs.PD, qp verbs.QP, cq verbs.CQ) (*prismkv.Client, error) {
		return prismkv.NewClient(ctx, pd, qp, cq, prismkv.ClientConfig{})
	})
	return b, srv, cs
}

func TestBasic(t *testing.T) {
	for _, scheme := range []string{"loop", "tcp"} {
		t.Run(scheme, func(t *testing.T) {
			_, _, cs := node(t, scheme, prismkv.Config{Slots: 4096, Memory: 64 << 20}, 1)
			kvtest.Basic(t, cs[0])
		})
	}
}

func TestLinearizable(t *testing.T) {
	t.Run("loop", func(t *testing.T) {
		_, _, cs := node(t, "loop", prismkv.Config{Slots: 1024, Memory: 32 << 20}, 4)
		kvtest.Linearizable(t, kvtest.Stores(cs), kvtest.LinConfig{})
	})
	t.Run("loop-faults", func(t *testing.T) {
		b, _, cs := node(t, "loop", prismkv.Config{Slots: 1024, Memory: 32 << 20}, 4)
		kvtest.Linearizable(t, kvtest.Stores(cs), kvtest.LinConfig{Faults: kvtest.LoopFaults(b.Fabric)})
	})
	t.Run("tcp", func(t *testing.T) {
		_, _, cs := node(t, "tcp", prismkv.Config{Slots: 1024, Memory: 32 << 20}, 4)
		kvtest.Linearizable(t, kvtest.Stores(cs), kvtest.LinConfig{})
	})
}

// TestItemsRecycled rewrites a few keys many times: the replaced items go
// back through the return ring and the node posts them again, so a small
// memory does not run out.
func TestItemsRecycled(t *testing.T) {
	_, srv, cs := node(t, "loop", prismkv.Config{Slots: 64, Memory: 12 << 20, Stock: 256 << 10}, 1)
	c := cs[0]
	ctx := context.Background()
	value := make([]byte, 1000) // 1 KiB class: 20,000 of them need 20 MiB, the node has 12
	for i := 0; i < 20000; i++ {
		value[0] = byte(i)
		if err := c.Put(ctx, []byte(fmt.Sprintf("k%d", i%4)), value); err != nil {
			t.Fatalf("put %d: %v (pool %+v)", i, err, srv.Stats())
		}
	}
	for k := 0; k < 4; k++ {
		v, err := c.Get(ctx, []byte(fmt.Sprintf("k%d", k)), nil)
		if err != nil || len(v) != 1000 || v[0] != byte(20000-4+k) {
			t.Fatalf("k%d: %d bytes, first %v, %v", k, len(v), v[:1], err)
		}
	}
	st := srv.Stats()
	t.Logf("pool %+v, cache hits %d", st, c.CacheHits())
	if st.Recycled == 0 || st.Returned < 10000 {
		t.Errorf("items were not recycled: %+v", st)
	}
	if c.CacheHits() < 19000 {
		t.Errorf("%d cache hits for 20000 PUTs to 4 keys", c.CacheHits())
	}
}

// TestSlotsReused: a node whose every slot has held a key, all of them
// deleted since, takes as many new keys again: a DELETE frees its slot.
func TestSlotsReused(t *testing.T) {
	const slots = 256
	_, srv, cs := node(t, "loop", prismkv.Config{Slots: slots, Memory: 16 << 20}, 1)
	c, ctx := cs[0], context.Background()
	for round := 0; round < 3; round++ {
		for i := 0; i < slots; i++ {
			if err := c.Put(ctx, []byte(fmt.Sprintf("r%d-%d", round, i)), []byte("v")); err != nil {
				t.Fatalf("round %d: put %d of %d: %v", round, i, slots, err)
			}
		}
		if err := c.Put(ctx, []byte("one too many"), nil); !errors.Is(err, kv.ErrFull) {
			t.Fatalf("round %d: a put into a full table: %v", round, err)
		}
		if st := srv.NodeStats(); st.Keys != slots || st.SlotsFree != 0 {
			t.Fatalf("round %d full: %+v", round, st)
		}
		for i := 0; i < slots; i++ {
			if err := c.Delete(ctx, []byte(fmt.Sprintf("r%d-%d", round, i))); err != nil {
				t.Fatal(err)
			}
		}
		if st := srv.NodeStats(); st.Keys != 0 || st.SlotsFree != slots {
			t.Fatalf("round %d emptied: %+v", round, st)
		}
		if _, err := c.Get(ctx, []byte(fmt.Sprintf("r%d-7", round)), nil); !errors.Is(err, kv.ErrNotFound) {
			t.Fatalf("round %d: a deleted key: %v", round, err)
		}
	}
}

// TestChurnLinearizable: keys deleted and re-inserted without end, far
// more distinct keys than the node has slots, from 4 clients: every
// history is linearizable and no insert finds the node full.
func TestChurnLinearizable(t *testing.T) {
	for _, scheme := range []string{"loop", "tcp"} {
		t.Run(scheme, func(t *testing.T) {
			_, _, cs := node(t, scheme, prismkv.Config{Slots: 128, Memory: 32 << 20}, 4)
			kvtest.Linearizable(t, kvtest.Stores(cs), kvtest.LinConfig{Churn: true, Keys: 16, Ops: 6000})
		})
	}
}

// TestCloseReturnsItems: the items a client replaced and had not yet
// returned go back to the node when it closes, not lost until the node
// restarts (a node serving many short clients leaked one or more each).
func TestCloseReturnsItems(t *testing.T) {
	_, srv, cs := node(t, "loop", prismkv.Config{Slots: 64, Memory: 8 << 20}, 1)
	c, ctx := cs[0], context.Background()
	for i := 0; i < 3; i++ { // 2 replaced items, then a deleted one: 3 to return
		if err := c.Put(ctx, []byte("k"), []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Delete(ctx, []byte("k")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	for deadline := time.Now().Add(5 * time.Second); srv.Stats().Returned < 3; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("pool %+v after the client closed, want 3 returned", srv.Stats())
		}
	}
}
