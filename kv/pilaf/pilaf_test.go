package pilaf_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/kv"
	"github.com/rdmakit/rdmakit/kv/kvtest"
	"github.com/rdmakit/rdmakit/kv/pilaf"
	_ "github.com/rdmakit/rdmakit/transport/tcp"
	"github.com/rdmakit/rdmakit/verbs"
)

// node starts a Pilaf node on a new bed and returns clients to it.
func node(t *testing.T, scheme string, cfg pilaf.Config, clients int) (*kvtest.Bed, *pilaf.Server, []*pilaf.Client) {
	t.Helper()
	b := kvtest.NewBed(t, scheme)
	srv, err := pilaf.NewServer(b.NodePD, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() }) // after the bed's cleanup stopped the serving
	cs := kvtest.Clients(t, b, clients, 256, 128, srv, func(ctx context.Context, pd verbs.PD, qp verbs.QP, cq verbs.CQ) (*pilaf.Client, error) {
		return pilaf.NewClient(ctx, pd, qp, cq, pilaf.ClientConfig{})
	})
	return b, srv, cs
}

func TestBasic(t *testing.T) {
	for _, scheme := range []string{"loop", "tcp"} {
		t.Run(scheme, func(t *testing.T) {
			_, _, cs := node(t, scheme, pilaf.Config{Buckets: 4096, Memory: 8 << 20}, 1)
			kvtest.Basic(t, cs[0])
		})
	}
}

func TestLinearizable(t *testing.T) {
	t.Run("loop", func(t *testing.T) {
		_, _, cs := node(t, "loop", pilaf.Config{Buckets: 1024, Memory: 4 << 20}, 4)
		kvtest.Linearizable(t, kvtest.Stores(cs), kvtest.LinConfig{})
	})
	t.Run("loop-faults", func(t *testing.T) {
		b, _, cs := node(t, "loop", pilaf.Config{Buckets: 1024, Memory: 4 << 20}, 4)
		kvtest.Linearizable(t, kvtest.Stores(cs), kvtest.LinConfig{Faults: kvtest.LoopFaults(b.Fabric)})
	})
	t.Run("tcp", func(t *testing.T) {
		_, _, cs := node(t, "tcp", pilaf.Config{Buckets: 1024, Memory: 4 << 20}, 4)
		kvtest.Linearizable(t, kvtest.Stores(cs), kvtest.LinConfig{})
	})
}

// tornRun has two writers rewrite four keys with uniform 512-byte values
// (one letter per version) on a node that writes a few bytes at a time,
// while two readers GET them; it returns the GETs that saw a value no
// PUT wrote (mixed letters), missed the key, or failed, and the readers'
// retries.
func tornRun(t *testing.T, trust bool) (bad int, retries uint64) {
	_, srv, cs := node(t, "loop", pilaf.Config{Buckets: 64, Memory: 1 << 20, Quarantine: 1}, 4)
	pilaf.SetTear(srv)
	readers := cs[2:]
	if trust {
		for _, c := range readers {
			pilaf.SetTrust(c)
		}
	}
	for k := 0; k < 4; k++ { // every key exists from now on: a miss is wrong too
		if err := cs[0].Put(context.Background(), []byte(fmt.Sprintf("key%d", k)), bytes.Repeat([]byte("Z"), 512)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	var wg sync.WaitGroup
	var badN atomic.Int64
	for w, c := range cs[:2] {
		wg.Add(1)
		go func(w int, c *pilaf.Client) {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				v := bytes.Repeat([]byte{byte('A' + (i+w)%26)}, 512)
				if err := c.Put(context.Background(), []byte(fmt.Sprintf("key%d", i%4)), v); err != nil {
					t.Error(err)
					return
				}
			}
		}(w, c)
	}
	for _, c := range readers {
		wg.Add(1)
		go func(c *pilaf.Client) {
			defer wg.Done()
			var buf []byte
			for i := 0; ctx.Err() == nil; i++ {
				var err error
				buf, err = c.Get(ctx, []byte(fmt.Sprintf("key%d", i%4)), buf[:0])
				if ctx.Err() != nil {
					continue
				}
				if err != nil || len(buf) != 512 || !bytes.Equal(buf, bytes.Repeat(buf[:1], 512)) {
					if badN.Add(1) == 1 {
						t.Logf("trust=%v: a GET saw %d bytes starting %q, %v", trust, len(buf), buf[:min(len(buf), 8)], err)
					}
					if err != nil {
						return // without CRCs, a torn pointer can kill the connection
					}
				}
			}
		}(c)
	}
	wg.Wait()
	for _, c := range readers {
		retries += c.Retries()
	}
	return int(badN.Load()), retries
}

// TestTornReadsCaught forces torn entries and extents: with the CRC
// checks every GET returns a value some PUT wrote (the checks retried),
// without them GETs return mixed bytes.
func TestTornReadsCaught(t *testing.T) {
	bad, retries := tornRun(t, false)
	t.Logf("with CRCs: %d bad GETs, %d retries", bad, retries)
	if bad != 0 || retries == 0 {
		t.Errorf("with CRCs: %d bad GETs (want 0), %d retries (want some)", bad, retries)
	}
	// The negative control: without CRCs some GET must see a torn
	// value. A tear needs a GET and a PUT to overlap, which a loaded
	// machine may not schedule in one run; a few runs are allowed.
	for run := 1; ; run++ {
		bad, _ = tornRun(t, true)
		t.Logf("without CRCs, run %d: %d bad GETs", run, bad)
		if bad > 0 {
			break
		}
		if run == 5 {
			t.Errorf("without CRCs no GET saw a torn value in %d runs: the test does not tear", run)
			break
		}
	}
}

// TestSpaceReturnsAfterDelete: a node whose extent memory is used up
// takes a PUT again as soon as one key is deleted, not after its
// quarantine of 1024 freed extents has filled; its counters follow.
func TestSpaceReturnsAfterDelete(t *testing.T) {
	_, srv, cs := node(t, "loop", pilaf.Config{Buckets: 4096, Memory: 64 << 10}, 1)
	c, ctx := cs[0], context.Background()
	value := make([]byte, 900) // a 1 KiB extent each: 64 fit
	n := 0
	for ; ; n++ {
		err := c.Put(ctx, []byte(fmt.Sprintf("k%d", n)), value)
		if errors.Is(err, kv.ErrFull) {
			break
		}
		if err != nil || n > 100 {
			t.Fatalf("put %d: %v", n, err)
		}
	}
	if st := srv.NodeStats(); st.Keys != int64(n) || st.MemoryFree >= 1024 {
		t.Fatalf("full after %d keys: %+v", n, st)
	}
	for i := 0; i < n; i++ {
		if err := c.Delete(ctx, []byte(fmt.Sprintf("k%d", i))); err != nil {
			t.Fatal(err)
		}
		if err := c.Put(ctx, []byte(fmt.Sprintf("new%d", i)), value); err != nil {
			t.Fatalf("put after %d deletes: %v", i+1, err)
		}
	}
	if st := srv.NodeStats(); st.Keys != int64(n) || st.Ops["delete"] != uint64(n) || st.Ops["put"] != uint64(2*n) {
		t.Errorf("after replacing every key: %+v", st)
	}
}

// TestChurnLinearizable: keys deleted and re-inserted without end, more
// distinct keys than the node has entries, from 4 clients: every history
// is linearizable and no PUT finds the node full.
func TestChurnLinearizable(t *testing.T) {
	for _, scheme := range []string{"loop", "tcp"} {
		t.Run(scheme, func(t *testing.T) {
			_, _, cs := node(t, scheme, pilaf.Config{Buckets: 128, Memory: 4 << 20}, 4)
			kvtest.Linearizable(t, kvtest.Stores(cs), kvtest.LinConfig{Churn: true, Keys: 16, Ops: 6000})
		})
	}
}
