package race_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/kv"
	"github.com/rdmakit/rdmakit/kv/kvtest"
	"github.com/rdmakit/rdmakit/kv/race"
	"github.com/rdmakit/rdmakit/smart"
	_ "github.com/rdmakit/rdmakit/transport/tcp"
	"github.com/rdmakit/rdmakit/verbs"
)

// node starts a RACE node on a new bed and returns clients to it (with a
// shared slot cache when cache is set: Smart-HT).
func node(t *testing.T, scheme string, cfg race.Config, clients int, cache *race.SlotCache) (*kvtest.Bed, *race.Server, []*race.Client) {
	t.Helper()
	b := kvtest.NewBed(t, scheme)
	srv, err := race.NewServer(b.NodePD, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	var rt *smart.Runtime
	if cache != nil { // Smart-HT: its lists run on a smart runtime's two workers
		ncq, err := b.Node.CreateCQ(256)
		if err != nil {
			t.Fatal(err)
		}
		rt, err = smart.New(context.Background(), smart.Config{Device: b.Dev, PD: b.PD, Nodes: []smart.ConnectFunc{b.RuntimeConnect(ncq)},
			Workers: 2, Throttle: true, Tuner: smart.TunerConfig{Candidates: []int{16, 64}, Delta: time.Millisecond},
			Backoff: smart.BackoffConfig{Tasks: 4096}, Gather: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(rt.Close) // before the bed closes the devices
		t.Cleanup(func() {
			var done uint64
			for _, w := range rt.Workers() {
				done += w.Stats().Completed
			}
			if done == 0 {
				t.Errorf("no Smart-HT request ran on the smart runtime's workers")
			}
		})
	}
	ccfg := race.ClientConfig{Cache: cache, Runtime: rt}
	if cache != nil { // Smart-HT
		ccfg.Backoff = &smart.BackoffConfig{C0: 4 * time.Microsecond, Dynamic: true}
	}
	cs := kvtest.Clients(t, b, clients, 512, 64, srv, func(ctx context.Context, pd verbs.PD, qp verbs.QP, cq verbs.CQ) (*race.Client, error) {
		return race.NewClient(ctx, pd, qp, cq, ccfg)
	})
	return b, srv, cs
}

func TestBasic(t *testing.T) {
	for _, scheme := range []string{"loop", "tcp"} {
		for _, smart := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/smart=%v", scheme, smart), func(t *testing.T) {
				var cache *race.SlotCache
				if smart {
					cache = race.NewSlotCache(0)
				}
				_, srv, cs := node(t, scheme, race.Config{Depth: 1, Memory: 64 << 20}, 1, cache)
				kvtest.Basic(t, cs[0])
				t.Logf("depth %d, %d subtables, %d splits", srv.Depth(), srv.Subtables(), cs[0].Splits())
			})
		}
	}
}

// grow inserts n filler keys from c until stop closes, splitting
// subtables while the checked operations run.
func grow(t *testing.T, c kv.Store, name string, n int) func(stop <-chan struct{}) {
	return func(stop <-chan struct{}) {
		for i := 0; i < n; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := c.Put(context.Background(), []byte(fmt.Sprintf("filler-%s-%d", name, i)), []byte("x")); err != nil {
				t.Errorf("filler %d: %v", i, err)
				return
			}
		}
	}
}

func TestLinearizable(t *testing.T) {
	for _, smart := range []bool{false, true} {
		name := "race"
		var cache *race.SlotCache
		if smart {
			name, cache = "smart-ht", race.NewSlotCache(0)
		}
		t.Run(name+"/loop", func(t *testing.T) {
			_, _, cs := node(t, "loop", race.Config{Depth: 1}, 4, cache)
			kvtest.Linearizable(t, kvtest.Stores(cs), kvtest.LinConfig{})
			if cache != nil {
				hits, misses := cache.Stats()
				t.Logf("speculative lookups: %d hits, %d misses", hits, misses)
				if hits == 0 {
					t.Errorf("no speculative hit")
				}
			}
		})
		t.Run(name+"/loop-resizing", func(t *testing.T) {
			_, srv, cs := node(t, "loop", race.Config{Depth: 1}, 6, cache)
			fill1, fill2 := grow(t, cs[4], "a", 50000), grow(t, cs[5], "b", 50000)
			kvtest.Linearizable(t, kvtest.Stores(cs[:4]), kvtest.LinConfig{Ops: 20000, Keys: 64, Faults: func(stop <-chan struct{}) {
				done := make(chan struct{})
				go func() { fill1(stop); close(done) }()
				fill2(stop)
				<-done
			}})
			t.Logf("depth %d, %d subtables after the run, %d + %d splits by the fillers", srv.Depth(), srv.Subtables(), cs[4].Splits(), cs[5].Splits())
			if srv.Subtables() < 6 {
				t.Errorf("%d subtables: too few splits during the run", srv.Subtables())
			}
		})
		t.Run(name+"/loop-faults", func(t *testing.T) {
			b, _, cs := node(t, "loop", race.Config{Depth: 1}, 4, cache)
			kvtest.Linearizable(t, kvtest.Stores(cs), kvtest.LinConfig{Faults: kvtest.LoopFaults(b.Fabric)})
		})
		t.Run(name+"/tcp", func(t *testing.T) {
			_, _, cs := node(t, "tcp", race.Config{Depth: 1}, 4, cache)
			kvtest.Linearizable(t, kvtest.Stores(cs), kvtest.LinConfig{})
		})
	}
}

// TestRoundTripsCountSplitRPCs: RoundTrips counts every RPC, the new
// subtable's of a split too: the node's memory handed out is exactly
// the first subtables, one subtable per split and one chunk per other
// RPC.
func TestRoundTripsCountSplitRPCs(t *testing.T) {
	_, srv, cs := node(t, "loop", race.Config{Depth: 1}, 1, nil)
	c := cs[0]
	for i := 0; c.Splits() < 2; i++ {
		if err := c.Put(context.Background(), []byte(fmt.Sprintf("key-%d", i)), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	splits := c.Splits()
	chunks := (srv.Used() - (2+splits)*race.SubtableSize) / race.ChunkSize
	if got, want := c.RPCs(), chunks+splits; got != want {
		t.Errorf("%d RPCs counted, want %d (%d chunks, %d splits)", got, want, chunks, splits)
	}
}

// TestConcurrentRefillsTakeOneChunk: writers that spend the client's
// chunk together take one new chunk between them, not one each (each
// replaced the others', which the node never saw again until the client
// closed: a node sized for its keys ran out of memory under load). 16
// writers put values that need about 6 chunks; the node must have handed
// out no more than that, plus the subtables and one chunk of slack.
func TestConcurrentRefillsTakeOneChunk(t *testing.T) {
	_, srv, cs := node(t, "loop", race.Config{Depth: 4}, 1, nil)
	c := cs[0]
	const writers, each, value = 16, 400, 960 // a block of 1,024 bytes
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			v := make([]byte, value)
			for i := range each {
				if err := c.Put(context.Background(), []byte(fmt.Sprintf("w%d-%d", w, i)), v); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	need := (writers*each*1024 + race.ChunkSize - 1) / race.ChunkSize
	subtables := (16 + c.Splits()) * race.SubtableSize
	chunks := (srv.Used() - subtables) / race.ChunkSize
	if chunks > uint64(need)+1 {
		t.Fatalf("%d chunks handed out for %d writers' values that fill %d", chunks, writers, need)
	}
}

// TestCancelledRefills: writers whose contexts end while they refill the
// chunk (the node's alloc RPC under way) leave the refill free: a writer
// with a live context then puts at once, and the chunks handed out stay
// bounded by what was written.
func TestCancelledRefills(t *testing.T) {
	_, srv, cs := node(t, "loop", race.Config{Depth: 4}, 1, nil)
	c := cs[0]
	v := make([]byte, 960)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := range 200 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%5)*time.Microsecond)
				_ = c.Put(ctx, []byte(fmt.Sprintf("w%d-%d", w, i)), v) // cancelled or not: either is fine
				cancel()
			}
		})
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Put(ctx, []byte("after"), v); err != nil {
		t.Fatalf("a put after the cancelled refills: %v", err)
	}
	subtables := (16 + c.Splits()) * race.SubtableSize
	if chunks, most := (srv.Used()-subtables)/race.ChunkSize, uint64(16*200*1024/race.ChunkSize+2); chunks > most {
		t.Fatalf("%d chunks handed out, at most %d could be needed", chunks, most)
	}
}
