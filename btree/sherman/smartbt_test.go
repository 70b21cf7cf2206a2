package sherman_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/btree"
	"github.com/rdmakit/rdmakit/btree/sherman"
	"github.com/rdmakit/rdmakit/transport/loop"
)

// smartConfigs are Smart-BT with every technique, Sherman+ (none) and
// each technique alone.
var smartConfigs = []sherman.Technique{sherman.AllTechniques, 0, sherman.Throttling, sherman.Backoff,
	sherman.CoroutineThrottle, sherman.SpecLookup}

// smartCfg is a client of 2 workers × 4 tasks with techniques tech.
func smartCfg(tech sherman.Technique) sherman.Config {
	return sherman.Config{Layout: small, Smart: &sherman.SmartConfig{Workers: 2, Tasks: 4, Techniques: tech}}
}

// TestSmartLinearizable: the linearizability run (16 clients: 4
// processes × 4 tasks, 20,000 operations, splits under contention) on
// Smart-BT, Sherman+ and each technique alone.
func TestSmartLinearizable(t *testing.T) {
	ops := 20000
	if long() {
		ops = 200000
	}
	for _, tech := range smartConfigs {
		t.Run(tech.String(), func(t *testing.T) {
			b := newBed(t, 1, 16<<20)
			if splits := runLinear(t, b, 4, 4, ops, 64, smartCfg(tech), nil); splits < uint64(ops/8/16/4) {
				t.Fatalf("only %d splits", splits)
			}
		})
	}
}

// TestSmartLinearizableTwoNodes: Smart-BT over two memory nodes (a
// worker's QP per memory node).
func TestSmartLinearizableTwoNodes(t *testing.T) {
	b := newBed(t, 2, 8<<20)
	runLinear(t, b, 2, 4, 8000, 48, smartCfg(sherman.AllTechniques), nil)
}

// TestSmartScanOracle: scans against the oracle while writers split
// leaves, on Smart-BT, Sherman+ and each technique alone.
func TestSmartScanOracle(t *testing.T) {
	for _, tech := range smartConfigs {
		t.Run(tech.String(), func(t *testing.T) { scanOracle(t, smartCfg(tech)) })
	}
}

// TestSpecStale: a reader learns every key's position, then another
// client updates, deletes, re-inserts and splits every leaf under it;
// the reader's positions are stale in every way, and its Gets must
// still return exactly what is there. Then its positions are poisoned
// outright (wrong slots, wrong versions) and read again.
func TestSpecStale(t *testing.T) {
	ctx := context.Background()
	b := newBed(t, 1, 16<<20)
	w := b.client(t, sherman.Config{Layout: small})
	r := b.client(t, smartCfg(sherman.SpecLookup))
	want := map[string]string{}
	put := func(k, v string) {
		if err := w.Put(ctx, []byte(k), []byte(v)); err != nil {
			t.Fatal(err)
		}
		want[k] = v
	}
	check := func(stage string) {
		t.Helper()
		for i := range 600 {
			k := fmt.Sprintf("k%04d", i)
			v, err := r.Get(ctx, []byte(k), nil)
			wv, ok := want[k]
			switch {
			case !ok && !errors.Is(err, btree.ErrNotFound):
				t.Fatalf("%s: %s = %q, %v; want not found", stage, k, v, err)
			case ok && (err != nil || string(v) != wv):
				t.Fatalf("%s: %s = %q, %v; want %q", stage, k, v, err, wv)
			}
		}
	}
	for i := 0; i < 600; i += 3 {
		put(fmt.Sprintf("k%04d", i), "a")
	}
	check("warm")
	check("warm again")
	st := r.Stats()
	if st.SpecHits < 200 {
		t.Fatalf("warm Gets: %+v", st)
	}
	for i := 0; i < 600; i += 3 {
		k := fmt.Sprintf("k%04d", i)
		switch i % 4 {
		case 0:
			put(k, "b") // updated in place
		case 1:
			if err := w.Delete(ctx, []byte(k)); err != nil {
				t.Fatal(err)
			}
			delete(want, k)
		case 2: // deleted, its slot reused by a neighbour, then back
			if err := w.Delete(ctx, []byte(k)); err != nil {
				t.Fatal(err)
			}
			delete(want, k)
			put(fmt.Sprintf("k%04d", i+1), "n")
			put(k, "c")
		}
	}
	for i := 0; i < 600; i++ { // every leaf splits
		if i%3 == 2 {
			put(fmt.Sprintf("k%04d", i), "d")
		}
	}
	before := r.Stats()
	check("stale")
	after := r.Stats()
	if after.SpecMisses == before.SpecMisses {
		t.Fatalf("no stale position noticed: %+v", after)
	}
	check("refreshed")
	if n := sherman.PoisonSpec(r, 1, 0); n == 0 {
		t.Fatal("nothing to poison")
	}
	check("wrong slots")
	sherman.PoisonSpec(r, 0, 1)
	check("wrong versions")
	sherman.PoisonSpec(r, 3, 7)
	check("both")
	t.Logf("%+v", r.Stats())
}

// TestSpecConcurrent: speculative Gets of a reader never go back in time
// while a writer updates, deletes and re-inserts keys and splits leaves:
// each key's values only grow, and a Get returns at least the last value
// acknowledged before it started.
func TestSpecConcurrent(t *testing.T) {
	ctx := context.Background()
	b := newBed(t, 1, 16<<20)
	w := b.client(t, smartCfg(sherman.AllTechniques))
	r := b.client(t, smartCfg(sherman.AllTechniques))
	const keys = 64
	var acked [keys]atomic.Int64 // the last value put, set after the Put returned
	done := make(chan struct{})
	var werr error
	go func() {
		defer close(done)
		rng := rand.New(rand.NewPCG(1, 2))
		for i := int64(1); i <= 3000; i++ {
			k := rng.IntN(keys)
			key := fmt.Appendf(nil, "k%03d", k)
			if rng.IntN(8) == 0 { // a delete and a fresh key nearby: slots move
				if werr = w.Delete(ctx, key); werr != nil {
					return
				}
				if werr = w.Put(ctx, fmt.Appendf(nil, "k%03d.%d", k, i), []byte("x")); werr != nil {
					return
				}
			}
			if werr = w.Put(ctx, key, fmt.Appendf(nil, "%012d", i)); werr != nil {
				return
			}
			acked[k].Store(i)
		}
	}()
	var last [keys]int64
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		for k := range keys {
			floor := acked[k].Load()
			v, err := r.Get(ctx, fmt.Appendf(nil, "k%03d", k), nil)
			if errors.Is(err, btree.ErrNotFound) {
				continue // deleted for a moment
			}
			if err != nil {
				t.Fatal(err)
			}
			var got int64
			if _, err := fmt.Sscanf(string(v), "%d", &got); err != nil {
				t.Fatalf("k%03d = %q", k, v)
			}
			if got < floor || got < last[k] {
				t.Fatalf("k%03d went back: %d after %d (acked %d)", k, got, last[k], floor)
			}
			last[k] = got
		}
	}
	if werr != nil {
		t.Fatal(werr)
	}
	if st := r.Stats(); st.SpecHits == 0 || w.Stats().Splits == 0 {
		t.Fatalf("reader %+v, writer %+v", st, w.Stats())
	}
}

// TestSmartRoundTrips: a warm speculative Get is one round trip and
// reads one entry (a hit, counted); a warm Sherman+ Get is one round
// trip and reads the leaf — on a loop fabric and over tcp (the memory
// node in its own process).
func TestSmartRoundTrips(t *testing.T) {
	t.Run("loop", func(t *testing.T) { smartRoundTrips(t, newBed(t, 1, 16<<20)) })
	t.Run("tcp", func(t *testing.T) { smartRoundTrips(t, tcpNode(t)) })
}

// smartRoundTrips is TestSmartRoundTrips on bed b.
func smartRoundTrips(t *testing.T, b *bed) {
	ctx := context.Background()
	l := sherman.Layout{KeySize: 16, ValueSize: 16, LeafSlots: 8, InnerSlots: 8}
	w := b.client(t, sherman.Config{Layout: l})
	const n = 500
	key := func(i int) []byte { return fmt.Appendf(nil, "k%05d", i) }
	for i := range n {
		if err := w.Put(ctx, key(i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		tech  sherman.Technique
		bytes int
	}{{sherman.SpecLookup, sherman.LeafEntrySize(l)}, {0, sherman.NodeSizeOf(l)}, {sherman.AllTechniques, sherman.LeafEntrySize(l)}} {
		c := b.client(t, sherman.Config{Layout: l, Smart: &sherman.SmartConfig{Workers: 1, Tasks: 2, Techniques: tc.tech}})
		for i := range n { // warms the caches
			if _, err := c.Get(ctx, key(i), nil); err != nil {
				t.Fatal(err)
			}
		}
		s0 := c.Stats()
		for i := range n {
			if _, err := c.Get(ctx, key(i), nil); err != nil {
				t.Fatal(err)
			}
		}
		s1 := c.Stats()
		if got := s1.RoundTrips - s0.RoundTrips; got != n {
			t.Fatalf("%v: %d warm Gets took %d round trips", tc.tech, n, got)
		}
		if got := s1.BytesRead - s0.BytesRead; got != uint64(n*tc.bytes) {
			t.Fatalf("%v: %d warm Gets read %d bytes, want %d each", tc.tech, n, got, tc.bytes)
		}
		if hits := s1.SpecHits - s0.SpecHits; tc.tech&sherman.SpecLookup != 0 && hits != n || s1.SpecMisses != s0.SpecMisses {
			t.Fatalf("%v: %d warm Gets: %d speculative hits, %d misses", tc.tech, n, hits, s1.SpecMisses-s0.SpecMisses)
		}
		t.Logf("%v: a warm Get reads %d B (a node is %d B)", tc.tech, tc.bytes, sherman.NodeSizeOf(l))
	}
}

// TestSmartCancel: Smart-BT operations whose context ends (before they
// start, or while the memory node is paused, lists in flight) fail with
// the context's error and leave the client whole.
func TestSmartCancel(t *testing.T) {
	b := newBed(t, 1, 4<<20)
	c := b.client(t, sherman.Config{Layout: small, Smart: &sherman.SmartConfig{Workers: 1, Tasks: 2, Techniques: sherman.AllTechniques}})
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 20 {
		if err := c.Put(done, fmt.Appendf(nil, "k%d", i), nil); !errors.Is(err, context.Canceled) {
			t.Fatalf("put with an ended context: %v", err)
		}
	}
	ctx := context.Background()
	for i := range 10 {
		if err := c.Put(ctx, fmt.Appendf(nil, "k%d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	f := loop.Get(b.fabric)
	f.Pause("mem0")
	for i := range 10 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		if _, err := c.Get(ctx, fmt.Appendf(nil, "k%d", i), nil); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("get while paused: %v", err)
		}
		cancel()
	}
	f.Resume("mem0")
	for i := range 50 {
		if err := c.Put(ctx, fmt.Appendf(nil, "k%d", i), []byte("w")); err != nil {
			t.Fatal(err)
		}
	}
	if v, err := c.Get(ctx, []byte("k7"), nil); err != nil || string(v) != "w" {
		t.Fatalf("get: %q %v", v, err)
	}
}

// TestSmartStats: a fixed work-request limit shows in every worker's
// figures; Sherman has none.
func TestSmartStats(t *testing.T) {
	b := newBed(t, 1, 4<<20)
	c := b.client(t, sherman.Config{Layout: small, Smart: &sherman.SmartConfig{Workers: 3, Tasks: 2, Techniques: sherman.Throttling, Limit: 6}})
	if err := c.Put(context.Background(), []byte("a"), []byte("b")); err != nil {
		t.Fatal(err)
	}
	st := c.SmartStats()
	if len(st) != 3 {
		t.Fatalf("%d workers", len(st))
	}
	for _, s := range st {
		if s.Limit != 6 || s.Tasks != 2 {
			t.Fatalf("%+v", s)
		}
	}
	if s := b.client(t, sherman.Config{Layout: small}).SmartStats(); s != nil {
		t.Fatalf("Sherman: %+v", s)
	}
}

// TestSmartOpenErrors: a Smart client without a device or with a
// Connect missing is refused.
func TestSmartOpenErrors(t *testing.T) {
	b := newBed(t, 2, 4<<20)
	conns := dial(t, b.dev, b.pd, b.nodes, 4)
	sc := b.smart(t, sherman.SmartConfig{})
	sc.Connect = sc.Connect[:1]
	if _, err := sherman.Open(context.Background(), b.pd, conns, sherman.Config{Smart: sc}); err == nil {
		t.Fatal("one Connect for two memory nodes")
	}
	if _, err := sherman.Open(context.Background(), b.pd, conns, sherman.Config{Smart: &sherman.SmartConfig{}}); err == nil {
		t.Fatal("no device")
	}
}

// TestTechniqueString names the technique sets.
func TestTechniqueString(t *testing.T) {
	for tech, want := range map[sherman.Technique]string{0: "none", sherman.SpecLookup: "spec-lookup",
		sherman.AllTechniques: "throttling+backoff+coroutine-throttle+spec-lookup"} {
		if got := tech.String(); got != want {
			t.Errorf("%d: %q, want %q", tech, got, want)
		}
	}
}

// TestSmartTCP: Smart-BT clients over tcp to a memory node in its own
// process (every worker its own tcp QP); the linearizability run.
func TestSmartTCP(t *testing.T) {
	b := tcpNode(t)
	ops := 4000
	if long() {
		ops = 40000
	}
	runLinear(t, b, 4, 4, ops, 48, smartCfg(sherman.AllTechniques), nil)
}

// TestSmartPauses: the linearizability run on Smart-BT while the memory
// node's network freezes now and then (lists wait in the workers'
// queues, credits stay out).
func TestSmartPauses(t *testing.T) {
	b := newBed(t, 1, 16<<20)
	f := loop.Get(b.fabric)
	runLinear(t, b, 4, 4, 8000, 48, smartCfg(sherman.AllTechniques), func() {
		for range 10 {
			time.Sleep(3 * time.Millisecond)
			f.Pause("mem0")
			time.Sleep(2 * time.Millisecond)
			f.Resume("mem0")
		}
	})
}

// TestSmartContention: four clients write one key (each process's tasks
// queue in its local lock table, the processes fight for the global
// lock): the failed lock CASes reach the workers' controllers — with
// Backoff the dynamic maximum starts at C0 and only a retry rate above
// p_high raises it, so some worker's maximum must have risen; the key's
// last value is one that was written.
func TestSmartContention(t *testing.T) {
	ctx := context.Background()
	b := newBed(t, 1, 4<<20)
	cfg := sherman.Config{Layout: small, Smart: &sherman.SmartConfig{Workers: 2, Tasks: 4,
		Techniques: sherman.Backoff | sherman.CoroutineThrottle, C0: 2 * time.Microsecond}}
	var clients []*sherman.Client
	var wg sync.WaitGroup
	for p := range 4 {
		c := b.client(t, cfg)
		clients = append(clients, c)
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 400 {
					if err := c.Put(ctx, []byte("hot"), fmt.Appendf(nil, "%d.%d.%d", p, g, i)); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	reacted := false
	for _, c := range clients {
		for _, w := range c.SmartStats() {
			if w.BackoffCMax > 2*time.Microsecond {
				reacted = true
			}
		}
	}
	if !reacted {
		t.Fatalf("no worker saw the conflicts: %+v", clients[0].SmartStats())
	}
	v, err := clients[0].Get(ctx, []byte("hot"), nil)
	var p, g, i int
	if _, serr := fmt.Sscanf(string(v), "%d.%d.%d", &p, &g, &i); err != nil || serr != nil || i >= 400 {
		t.Fatalf("hot = %q, %v", v, err)
	}
	t.Logf("%+v", clients[0].SmartStats())
}
