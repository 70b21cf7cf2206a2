package prismkv_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/kv"
	"github.com/rdmakit/rdmakit/kv/kvtest"
	"github.com/rdmakit/rdmakit/kv/prismkv"
	"github.com/rdmakit/rdmakit/verbs"
)

func init() {
	kvtest.WriterRole("prismkv-writer", func(ctx context.Context, addr string) (kv.Store, error) {
		return dialNode(ctx, addr)
	}, prismkv.SetHook)
}

// dialNode connects a client, on its own tcp device, to the node at addr
// (kvtest.ServeNode's).
func dialNode(ctx context.Context, addr string) (*kvtest.Remote[*prismkv.Client], error) {
	return kvtest.DialNode(ctx, addr, "prismkv", func(ctx context.Context, pd verbs.PD, qp verbs.QP, cq verbs.CQ) (*prismkv.Client, error) {
		return prismkv.NewClient(ctx, pd, qp, cq, prismkv.ClientConfig{})
	})
}

// TestKilledWriters kills writer processes (SIGKILL) holding a segment
// lock of an insert (its install list not posted), holding return ring
// slots reserved but not filled, and at random points of their PUTs and
// DELETEs (an ALLOCATE'd item not yet installed, say). The healthy
// clients then insert keys into the dead writer's segment (its lock is
// taken over when its lease runs out), pass porcupine, and overwrite
// items for twice the node's item memory: the node must recycle past the
// dead writer's ring slots. Each Close returns within a second. PRISM-KV
// has no split: its index is a fixed array of slots.
func TestKilledWriters(t *testing.T) {
	const slots = 1 << 14
	const memory = 2 << 20
	const ringGrace = 100 * time.Millisecond
	addr, srv := kvtest.ServeNode(t, "prismkv", func(pd verbs.PD) (*prismkv.Server, error) {
		s, err := prismkv.NewServer(pd, prismkv.Config{Slots: slots, Memory: memory, Stock: 64 << 10})
		if err == nil {
			prismkv.SetRingGrace(s, ringGrace)
		}
		return s, err
	})
	var cs []kv.Store
	for range 4 {
		c, err := dialNode(context.Background(), addr)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	segment := func(key string) uint64 { return kv.Hash([]byte(key)) % slots / prismkv.SegSlots }
	kvtest.KillWriters(t, cs, kvtest.KillConfig{
		Role: "prismkv-writer", Dial: addr,
		Points:  []string{prismkv.HookReturning, prismkv.HookLocked, kvtest.Random, kvtest.Random},
		Inserts: 400,
		Victim:  func(point string) bool { return point == prismkv.HookLocked },
		Near:    func(key, victim string) bool { return segment(key) == segment(victim) },
		// A few: every key of a cluster costs the inserts after it a
		// probe.
		NearEvery: 40,
	})
	if !t.Failed() {
		// The ring passes the dead writers' reserved slots within two
		// graces of their reservation: wait for that with a wide margin
		// (the node's memory would run out first otherwise).
		time.Sleep(10 * ringGrace)
		churn(t, cs, 2*memory)
	}
	t.Logf("the node passed %d return ring holes", srv.RingHoles())
	for _, c := range cs {
		kvtest.CloseWithin(t, c, time.Second)
	}
}

// churn has the clients overwrite a key each with 1 KB values until
// they have written total bytes: the node must recycle the replaced
// items.
func churn(t *testing.T, cs []kv.Store, total int) {
	t.Helper()
	value := make([]byte, 1000)
	var wg sync.WaitGroup
	for ci, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := []byte(fmt.Sprintf("churn-%d", ci))
			for i := 0; i < total/len(value)/len(cs); i++ {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err := c.Put(ctx, key, value)
				cancel()
				if err != nil {
					t.Errorf("client %d, overwrite %d: %v", ci, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
