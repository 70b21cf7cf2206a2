package stores_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/kv/kvtest"
	"github.com/rdmakit/rdmakit/kv/stores"
	"github.com/rdmakit/rdmakit/transport/loop"
)

// TestSizedForValues loads every design with as many keys of 512-byte
// values as it was sized for, then overwrites them all once: the node's
// item memory must hold them (a node sized for 64-byte values ran out of
// memory here).
func TestSizedForValues(t *testing.T) {
	const keys, value = 20000, 512
	for _, d := range stores.Designs {
		t.Run(d, func(t *testing.T) {
			ctx := context.Background()
			bed := kvtest.NewBed(t, "loop")
			srv, err := stores.NewServer(d, bed.NodePD, keys, value)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { srv.Close() }) // before the bed closes the devices
			qp, cq := bed.Connect(t, stores.QPCap.MaxSendWR, stores.QPCap.MaxRecvWR, srv)
			c, err := stores.NewClient(ctx, d, bed.PD, qp, cq, stores.ClientOptions{Slots: 64})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for round := byte(0); round < 2; round++ {
				var wg sync.WaitGroup
				errs := make(chan error, 8)
				for w := 0; w < 8; w++ {
					wg.Add(1)
					go func(w int) {
						defer wg.Done()
						v := make([]byte, value)
						for i := w; i < keys; i += 8 {
							v[0], v[1] = byte(i), round
							if err := c.Put(ctx, []byte(fmt.Sprintf("user%d", i)), v); err != nil {
								errs <- fmt.Errorf("round %d, key %d: %w", round, i, err)
								return
							}
						}
					}(w)
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Fatal(err)
				}
			}
			for _, i := range []int{0, keys / 2, keys - 1} {
				got, err := c.Get(ctx, []byte(fmt.Sprintf("user%d", i)), nil)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != value || got[0] != byte(i) || got[1] != 1 {
					t.Fatalf("key %d: got %d bytes starting %v, want %d bytes starting [%d 1]", i, len(got), got[:min(2, len(got))], value, byte(i))
				}
			}
		})
	}
}

// TestPrismKVRefillsAfterDeletes: a PRISM-KV node sized as kv serve
// sizes it for keys keys (4 × keys slots) keeps taking new keys after it
// has held more than 4 × keys distinct ones, all deleted since: 5 rounds
// of keys new keys put then deleted, then a round kept. The node refused
// every new key once its slots had all been used.
func TestPrismKVRefillsAfterDeletes(t *testing.T) {
	const keys = 4096 // 16,384 slots, kv serve's smallest table
	ctx := context.Background()
	bed := kvtest.NewBed(t, "loop")
	srv, err := stores.NewServer("prism-kv", bed.NodePD, keys, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() }) // before the bed closes the devices
	qp, cq := bed.Connect(t, stores.QPCap.MaxSendWR, stores.QPCap.MaxRecvWR, srv)
	c, err := stores.NewClient(ctx, "prism-kv", bed.PD, qp, cq, stores.ClientOptions{Slots: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	each := func(round int, do func(key []byte) error) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := w; i < keys; i += 8 {
					if err := do([]byte(fmt.Sprintf("r%d-%d", round, i))); err != nil {
						errs <- fmt.Errorf("round %d, key %d: %w", round, i, err)
						return
					}
				}
			}(w)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	const rounds = 5 // 20,480 distinct keys
	for round := 0; round <= rounds; round++ {
		each(round, func(k []byte) error { return c.Put(ctx, k, k) })
		if st := srv.NodeStats(); st.Keys != keys {
			t.Fatalf("round %d, filled: %+v", round, st)
		}
		if round == rounds {
			break
		}
		each(round, func(k []byte) error { return c.Delete(ctx, k) })
		if st := srv.NodeStats(); st.Keys != 0 || st.SlotsFree != 4*keys {
			t.Fatalf("round %d, emptied: %+v", round, st)
		}
	}
}

// TestClientsOutlastSlowNode: a node that answers nothing for a second
// (its machine loaded, its process descheduled: a paused loop node) does
// not cost its clients their connections; their operations finish once
// it answers again. With the verbs default retry budget (half a second)
// the connection failed with RETRY_EXC_ERR, as churn runs under load did.
func TestClientsOutlastSlowNode(t *testing.T) {
	for _, d := range []string{"pilaf", "prism-kv"} {
		t.Run(d, func(t *testing.T) {
			ctx := context.Background()
			bed := kvtest.NewBed(t, "loop")
			srv, err := stores.NewServer(d, bed.NodePD, 1000, 8)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { srv.Close() })
			qp, cq := bed.Connect(t, stores.QPCap.MaxSendWR, stores.QPCap.MaxRecvWR, srv)
			c, err := stores.NewClient(ctx, d, bed.PD, qp, cq, stores.ClientOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.Put(ctx, []byte("k"), []byte("v")); err != nil {
				t.Fatal(err)
			}
			f := loop.Get(bed.Fabric)
			f.Pause("node")
			done := make(chan error, 2)
			go func() { done <- c.Put(ctx, []byte("k"), []byte("w")) }()
			go func() { _, err := c.Get(ctx, []byte("k"), nil); done <- err }()
			time.Sleep(time.Second)
			f.Resume("node")
			for range 2 {
				if err := <-done; err != nil {
					t.Fatalf("an operation across a 1 s pause: %v", err)
				}
			}
			if v, err := c.Get(ctx, []byte("k"), nil); err != nil || string(v) != "w" {
				t.Fatalf("after the pause: %q, %v", v, err)
			}
		})
	}
}
