package sherman_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/btree/sherman"
	"github.com/rdmakit/rdmakit/transport/loop"
)

// TestScanRunTrips: with a warm index cache a 100-key scan reads its
// leaves in runs — at most two round trips (two when the run reaches
// the end of its level-1 node) — where the sibling walk took one per
// leaf; Sherman and Smart-BT alike.
func TestScanRunTrips(t *testing.T) {
	for _, sys := range []struct {
		name string
		cfg  sherman.Config
	}{{"sherman", sherman.Config{}}, {"smart-bt", smartCfg(sherman.AllTechniques)}} {
		t.Run(sys.name, func(t *testing.T) {
			ctx := context.Background()
			b := newBed(t, 1, 32<<20)
			sys.cfg.Layout = sherman.Layout{KeySize: 16, ValueSize: 16, LeafSlots: 16, InnerSlots: 32}
			c := b.client(t, sys.cfg)
			const n = 3000
			r := rand.New(rand.NewPCG(1, 2))
			for _, i := range r.Perm(n) {
				if err := c.Put(ctx, benchKey(i), []byte("v")); err != nil {
					t.Fatal(err)
				}
			}
			for i := range n { // warms the index cache
				if _, err := c.Get(ctx, benchKey(i), nil); err != nil {
					t.Fatal(err)
				}
			}
			maxTrips := uint64(0)
			for range 50 {
				from := r.IntN(n - 100)
				t0 := c.Stats().RoundTrips
				it := c.Scan(ctx, benchKey(from), nil, 100)
				got := 0
				for it.Next() {
					if !bytes.Equal(it.Key(), benchKey(from+got)) {
						t.Fatalf("scan from %d: key %d is %s", from, got, it.Key())
					}
					got++
				}
				if it.Err() != nil || got != 100 {
					t.Fatalf("scan from %d: %d keys, %v", from, got, it.Err())
				}
				maxTrips = max(maxTrips, c.Stats().RoundTrips-t0)
			}
			if maxTrips > 2 {
				t.Fatalf("a warm 100-key scan took %d round trips", maxTrips)
			}
		})
	}
}

// TestScanRunSplit: a scan plans its run of leaves from its cached
// level-1 node, then (at the hook, before its READs go out) another
// client inserts keys that split those leaves — and the level-1 node
// too, so the scanner's copy is stale. The run's leaves no longer
// chain (a split leaf's high fence is now below its old right
// neighbour's low fence): the scan must notice, go on from the split
// leaf's sibling, and still return every key that was there before,
// once and in order, and nothing never written.
func TestScanRunSplit(t *testing.T) {
	ctx := context.Background()
	b := newBed(t, 1, 32<<20)
	cfg := sherman.Config{Layout: sherman.Layout{KeySize: 16, ValueSize: 16, LeafSlots: 8, InnerSlots: 16}}
	w := b.client(t, cfg)
	const n = 400
	for i := 0; i < n; i += 4 {
		if err := w.Put(ctx, benchKey(i), []byte("old")); err != nil {
			t.Fatal(err)
		}
	}
	sc := b.client(t, cfg)
	for i := 0; i < n; i += 4 {
		if _, err := sc.Get(ctx, benchKey(i), nil); err != nil {
			t.Fatal(err)
		}
	}
	var fired atomic.Bool
	var hookErr error
	sherman.SetTestHook(func(p string) error {
		if p != sherman.HookScanPlanned || !fired.CompareAndSwap(false, true) {
			return nil
		}
		for i := range n { // fills and splits the leaves of the first runs
			if i%4 != 0 {
				if err := w.Put(ctx, benchKey(i), []byte("new")); err != nil {
					hookErr = err
					return err
				}
			}
		}
		return nil
	})
	t.Cleanup(func() { sherman.SetTestHook(nil) })
	splits0, trips0 := w.Stats().Splits, sc.Stats().RoundTrips
	it := sc.Scan(ctx, nil, nil, 0)
	var prev []byte
	old := 0
	for it.Next() {
		k := bytes.Clone(it.Key())
		if prev != nil && bytes.Compare(prev, k) >= 0 {
			t.Fatalf("%s after %s", k, prev)
		}
		prev = k
		var i int
		if _, err := fmt.Sscanf(string(k), "user%d", &i); err != nil || i >= n {
			t.Fatalf("key %q never written", k)
		}
		want := "new"
		if i%4 == 0 {
			want, old = "old", old+1
			if !bytes.Equal(k, benchKey(4*(old-1))) {
				t.Fatalf("old key %d is %s: one missing before it", old-1, k)
			}
		}
		if string(it.Value()) != want {
			t.Fatalf("%s = %q, want %q", k, it.Value(), want)
		}
	}
	if it.Err() != nil || hookErr != nil {
		t.Fatal(it.Err(), hookErr)
	}
	if old != n/4 {
		t.Fatalf("%d old keys of %d", old, n/4)
	}
	if !fired.Load() || w.Stats().Splits-splits0 < 20 {
		t.Fatalf("the hook fired %v, %d splits: no split under the scan", fired.Load(), w.Stats().Splits-splits0)
	}
	t.Logf("%d splits under the scan; it took %d round trips", w.Stats().Splits-splits0, sc.Stats().RoundTrips-trips0)
}

// TestScanRunConcurrent: every task of a Sherman+ client (no
// throttling: nothing bounds its outstanding requests but the QP)
// scans at once, each list up to 16 READs; QPDepth leaves room for
// them all, and every scan returns its 100 keys.
func TestScanRunConcurrent(t *testing.T) {
	ctx := context.Background()
	b := newBed(t, 1, 32<<20)
	cfg := sherman.Config{Layout: sherman.Layout{KeySize: 16, ValueSize: 16, LeafSlots: 8, InnerSlots: 32},
		Smart: &sherman.SmartConfig{Workers: 2, Tasks: 4}}
	c := b.client(t, cfg)
	const n = 2000
	for i := range n {
		if err := c.Put(ctx, benchKey(i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 5))
			for range 200 {
				from := r.IntN(n - 100)
				it := c.Scan(ctx, benchKey(from), nil, 100)
				got := 0
				for it.Next() {
					got++
				}
				if it.Err() != nil || got != 100 {
					t.Errorf("scan from %d: %d keys, %v", from, got, it.Err())
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestScanRunCancel: a scan whose run of leaf READs is in flight when its
// context ends (the memory node paused) stops with the context's error,
// having returned no key it had not read; after the node resumes the
// client is whole (its slot came back): the same scan returns every key,
// and writes go through. Sherman and Smart-BT alike.
func TestScanRunCancel(t *testing.T) {
	for _, sys := range []struct {
		name string
		cfg  sherman.Config
	}{{"sherman", sherman.Config{Slots: 2}}, {"smart-bt", smartCfg(sherman.AllTechniques)}} {
		t.Run(sys.name, func(t *testing.T) {
			ctx := context.Background()
			b := newBed(t, 1, 32<<20)
			sys.cfg.Layout = sherman.Layout{KeySize: 16, ValueSize: 16, LeafSlots: 16, InnerSlots: 32}
			c := b.client(t, sys.cfg)
			const n = 1000
			for i := range n {
				if err := c.Put(ctx, benchKey(i), []byte("v")); err != nil {
					t.Fatal(err)
				}
			}
			f := loop.Get(b.fabric)
			f.Pause("mem0")
			for range 4 { // more than the Sherman client's two slots: each came back
				short, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
				it := c.Scan(short, benchKey(100), nil, 100)
				got := 0
				for it.Next() {
					got++
				}
				cancel()
				if !errors.Is(it.Err(), context.DeadlineExceeded) || got != 0 {
					t.Fatalf("a scan while the node is paused: %d keys, %v; want none and the deadline", got, it.Err())
				}
				it.Close()
			}
			f.Resume("mem0")
			it := c.Scan(ctx, benchKey(100), nil, 100)
			got := 0
			for it.Next() {
				if !bytes.Equal(it.Key(), benchKey(100+got)) {
					t.Fatalf("after resume: key %d is %s", got, it.Key())
				}
				got++
			}
			if it.Err() != nil || got != 100 {
				t.Fatalf("after resume: %d keys, %v", got, it.Err())
			}
			if err := c.Put(ctx, benchKey(5), []byte("w")); err != nil {
				t.Fatalf("put after the cancelled scans: %v", err)
			}
		})
	}
}
