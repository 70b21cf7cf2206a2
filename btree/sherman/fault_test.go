package sherman_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmakit/rdmakit/btree"
	"github.com/rdmakit/rdmakit/btree/sherman"
	"github.com/rdmakit/rdmakit/transport/loop"
)

var errDied = errors.New("died here")

// dieOnceAt makes the first operation that reaches point stop there (as
// if its client died) and reports whether one did.
func dieOnceAt(t *testing.T, point string) *atomic.Bool {
	var died atomic.Bool
	sherman.SetTestHook(func(p string) error {
		if p == point && died.CompareAndSwap(false, true) {
			return errDied
		}
		return nil
	})
	t.Cleanup(func() { sherman.SetTestHook(nil) })
	return &died
}

// TestDeadLockHolder: a client dies holding a leaf's lock; another
// client's write to that leaf waits out the lease, takes the lock over
// and succeeds.
func TestDeadLockHolder(t *testing.T) {
	ctx := context.Background()
	b := newBed(t, 1, 4<<20)
	cfg := sherman.Config{Layout: small, Lease: 100 * time.Millisecond}
	victim := b.client(t, cfg)
	died := dieOnceAt(t, sherman.HookLocked)
	if err := victim.Put(ctx, []byte("a"), []byte("1")); !errors.Is(err, errDied) || !died.Load() {
		t.Fatalf("victim: %v", err)
	}
	victim.Close()
	c := b.client(t, cfg)
	t0 := time.Now()
	if err := c.Put(ctx, []byte("a"), []byte("2")); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d < cfg.Lease {
		t.Fatalf("took the lock after %v, before the lease of %v", d, cfg.Lease)
	}
	if v, err := c.Get(ctx, []byte("a"), nil); err != nil || string(v) != "2" {
		t.Fatalf("get: %q %v", v, err)
	}
	if st := c.Stats(); st.TakeOvers != 1 {
		t.Fatalf("take-overs: %d", st.TakeOvers)
	}
}

// TestHalfSplit: a client dies after a split wrote both halves but
// before the parent learnt of the new one (at the root leaf and deeper).
// Readers still find every key through the sibling pointer, and later
// writers go on splitting the tree around it.
func TestHalfSplit(t *testing.T) {
	for _, before := range []int{0, 40} {
		t.Run(fmt.Sprint(before, "keys"), func(t *testing.T) {
			ctx := context.Background()
			b := newBed(t, 1, 8<<20)
			cfg := sherman.Config{Layout: small}
			victim := b.client(t, cfg)
			key := func(i int) []byte { return fmt.Appendf(nil, "k%04d", i) }
			for i := range before {
				if err := victim.Put(ctx, key(i*10), key(i*10)); err != nil {
					t.Fatal(err)
				}
			}
			died := dieOnceAt(t, sherman.HookSplitHalf)
			i := 0
			for ; !died.Load(); i++ {
				if err := victim.Put(ctx, key(i*10+5), key(i*10+5)); err != nil && !errors.Is(err, errDied) {
					t.Fatal(err)
				}
			}
			victim.Close()
			c := b.client(t, cfg)
			for j := range i {
				if v, err := c.Get(ctx, key(j*10+5), nil); err != nil || string(v) != string(key(j*10+5)) {
					t.Fatalf("key %s: %q %v", key(j*10+5), v, err)
				}
			}
			for j := range 300 {
				if err := c.Put(ctx, key(j*3+1), []byte("x")); err != nil {
					t.Fatal(err)
				}
			}
			n := 0
			it := c.Scan(ctx, nil, nil, 0)
			for it.Next() {
				n++
			}
			if it.Err() != nil || n < before+i+250 {
				t.Fatalf("scan: %d keys: %v", n, it.Err())
			}
		})
	}
}

// TestPauses: the linearizability run while the memory node's network
// freezes now and then.
func TestPauses(t *testing.T) {
	b := newBed(t, 1, 16<<20)
	f := loop.Get(b.fabric)
	runLinear(t, b, 4, 4, 8000, 48, sherman.Config{Layout: small}, func() {
		for range 10 {
			time.Sleep(3 * time.Millisecond)
			f.Pause("mem0")
			time.Sleep(2 * time.Millisecond)
			f.Resume("mem0")
		}
	})
}

// TestHandOver: tasks of one client on one key hand the global lock to
// each other, and none of their writes is lost.
func TestHandOver(t *testing.T) {
	ctx := context.Background()
	b := newBed(t, 1, 4<<20)
	c := b.client(t, sherman.Config{Layout: small, Slots: 16})
	var wg sync.WaitGroup
	for id := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				if err := c.Put(ctx, fmt.Appendf(nil, "hot%d", id%2), fmt.Appendf(nil, "%d", i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if st := c.Stats(); st.HandOvers == 0 {
		t.Fatalf("no hand-over in %d writes of 16 tasks: %+v", 16*200, st)
	}
	t.Logf("%+v", c.Stats())
}

// TestCancel: operations whose context ends (before they start, or
// while the memory node is paused) fail with the context's error and
// leave the client whole: its slots come back, its locks are released.
func TestCancel(t *testing.T) {
	b := newBed(t, 1, 4<<20)
	c := b.client(t, sherman.Config{Layout: small, Slots: 2})
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 20 {
		if err := c.Put(done, fmt.Appendf(nil, "k%d", i), nil); !errors.Is(err, context.Canceled) {
			t.Fatalf("put with an ended context: %v", err)
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
	ctx := context.Background()
	for i := range 50 {
		if err := c.Put(ctx, fmt.Appendf(nil, "k%d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if v, err := c.Get(ctx, []byte("k7"), nil); err != nil || string(v) != "v" {
		t.Fatalf("get: %q %v", v, err)
	}
}

// TestSlowHolder: a holder stalls past the lease with the lock; another
// client takes the lock over and writes. The slow holder's write-back,
// guarded by its lease word, does not happen: it learns it from the
// guard and writes again from the start, so its value is the last.
func TestSlowHolder(t *testing.T) {
	ctx := context.Background()
	b := newBed(t, 1, 4<<20)
	cfg := sherman.Config{Layout: small, Lease: 50 * time.Millisecond}
	slow, fast := b.client(t, cfg), b.client(t, cfg)
	if err := fast.Put(ctx, []byte("k"), []byte("0")); err != nil {
		t.Fatal(err)
	}
	var first atomic.Bool
	stalled, goOn := make(chan struct{}), make(chan struct{})
	sherman.SetTestHook(func(p string) error {
		if p == sherman.HookLocked && first.CompareAndSwap(false, true) {
			close(stalled)
			<-goOn
		}
		return nil
	})
	t.Cleanup(func() { sherman.SetTestHook(nil) })
	done := make(chan error)
	go func() { done <- slow.Put(ctx, []byte("k"), []byte("slow")) }()
	<-stalled
	if err := fast.Put(ctx, []byte("k"), []byte("fast")); err != nil {
		t.Fatal(err)
	}
	if v, _ := fast.Get(ctx, []byte("k"), nil); string(v) != "fast" {
		t.Fatalf("after the take-over: %q", v)
	}
	close(goOn)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if v, _ := fast.Get(ctx, []byte("k"), nil); string(v) != "slow" {
		t.Fatalf("after the slow holder's retry: %q", v)
	}
	if fast.Stats().TakeOvers != 1 {
		t.Fatalf("take-overs: %+v", fast.Stats())
	}
}

// TestReadDuringUpdates (Sherman issue #27): a key updated without pause
// by one client is found by every concurrent Get of others, with a
// value that was written.
func TestReadDuringUpdates(t *testing.T) {
	ctx := context.Background()
	b := newBed(t, 1, 4<<20)
	w := b.client(t, sherman.Config{Layout: small})
	for i := range 20 {
		if err := w.Put(ctx, fmt.Appendf(nil, "k%02d", i), []byte("v0")); err != nil {
			t.Fatal(err)
		}
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			if err := w.Put(ctx, []byte("k07"), fmt.Appendf(nil, "v%d", i%1000)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	r := b.client(t, sherman.Config{Layout: small})
	for range 3000 {
		v, err := r.Get(ctx, []byte("k07"), nil)
		if err != nil || len(v) < 2 || v[0] != 'v' {
			t.Fatalf("get of a key under update: %q %v", v, err)
		}
	}
	stop.Store(true)
	wg.Wait()
}

// TestFull: a tree that runs out of nodes says ErrFull and keeps every
// key it took.
func TestFull(t *testing.T) {
	ctx := context.Background()
	l := small
	size := sherman.NodeSizeOf(l)
	b := newBed(t, 1, int64(64*(size+8)+4096))
	c := b.client(t, sherman.Config{Layout: l})
	var put []int
	for i := 0; ; i++ {
		err := c.Put(ctx, fmt.Appendf(nil, "k%05d", i), []byte("v"))
		if errors.Is(err, btree.ErrFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		put = append(put, i)
		if i > 10000 {
			t.Fatal("never full")
		}
	}
	if len(put) < 64 {
		t.Fatalf("full after %d keys", len(put))
	}
	for _, i := range put {
		if _, err := c.Get(ctx, fmt.Appendf(nil, "k%05d", i), nil); err != nil {
			t.Fatalf("k%05d after full: %v", i, err)
		}
	}
	t.Logf("full after %d keys", len(put))
}
