package prismkv

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// TestSlotCacheEntries: an entry is found by its key's hash only, and a
// forgotten or evicted one is gone.
func TestSlotCacheEntries(t *testing.T) {
	c := newSlotCache(1) // one bucket
	const ha, hb = 0x1234_5678_9abc_def0, 0x1234_5678_9abc_def2
	if _, ok := c.lookup(ha); ok {
		t.Fatal("an empty cache has an entry")
	}
	c.remember(ha, cached{slot: 7, ptr: 70, n: 700})
	if v, ok := c.lookup(ha); !ok || v != (cached{slot: 7, ptr: 70, n: 700}) {
		t.Fatalf("lookup: %+v, %v", v, ok)
	}
	if _, ok := c.lookup(hb); ok {
		t.Fatal("another key's hash finds the entry")
	}
	c.forget(hb) // not its entry: stays
	if _, ok := c.lookup(ha); !ok {
		t.Fatal("forgetting another key dropped the entry")
	}
	c.remember(hb, cached{slot: 8})
	if _, ok := c.lookup(ha); ok {
		t.Fatal("an evicted entry is still found")
	}
	c.forget(hb)
	if _, ok := c.lookup(hb); ok {
		t.Fatal("a forgotten entry is still found")
	}
	if _, ok := newSlotCache(-1).lookup(ha); ok {
		t.Fatal("a disabled cache has an entry")
	}
}

// TestSlotCacheNeverMixesKeys: while two keys take turns in one bucket, a
// lookup finds a key's own slot and value or nothing — never another
// key's slot under its tag (a PUT would trust that slot as far as its
// 24-byte key check).
func TestSlotCacheNeverMixesKeys(t *testing.T) {
	c := newSlotCache(1) // one bucket
	keys := []struct {
		h uint64
		v cached
	}{{0x10, cached{slot: 1, ptr: 100, n: 1000}}, {0x20, cached{slot: 2, ptr: 200, n: 2000}}}
	var wg sync.WaitGroup
	var writes atomic.Int64
	stop := make(chan struct{})
	for _, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				c.remember(k.h, k.v)
				writes.Add(1)
				if k.h == keys[0].h {
					c.forget(k.h)
				}
			}
		}()
	}
	found := 0
	for i := 0; writes.Load() < 20_000 || (found < 1000 && i < 5_000_000); i++ {
		if i%1024 == 0 {
			runtime.Gosched() // on one core too, the writers run between lookups
		}
		k := keys[i%2]
		if v, ok := c.lookup(k.h); ok {
			found++
			if v != k.v {
				close(stop)
				wg.Wait()
				t.Fatalf("lookup of %#x found %+v, want %+v", k.h, v, k.v)
			}
		}
	}
	close(stop)
	wg.Wait()
}

// TestSlotCacheWriterInProgress: while a writer has a bucket (its
// sequence odd), lookups miss and other writers skip it; its entry shows
// once it is done.
func TestSlotCacheWriterInProgress(t *testing.T) {
	c := newSlotCache(1)
	const ha, hb = 0x10, 0x20
	c.remember(ha, cached{slot: 1, ptr: 100, n: 1000})
	b, tag := c.bucket(hb)
	head, ok := b.lock()
	if !ok {
		t.Fatal("lock of an idle bucket failed")
	}
	b.tag.Store(tag) // half written: key b's tag over key a's words
	if v, ok := c.lookup(hb); ok {
		t.Fatalf("a half-written entry was found: %+v", v)
	}
	if _, ok := c.lookup(ha); ok {
		t.Fatal("an entry being replaced was found")
	}
	c.remember(ha, cached{slot: 3}) // skips: the bucket is being written
	if _, ok := b.lock(); ok {
		t.Fatal("two writers had the bucket")
	}
	b.ptr.Store(200)
	b.n.Store(2000)
	b.unlock(head, 2)
	if v, ok := c.lookup(hb); !ok || v != (cached{slot: 2, ptr: 200, n: 2000}) {
		t.Fatalf("lookup after the write: %+v, %v", v, ok)
	}
	if _, ok := c.lookup(ha); ok {
		t.Fatal("the replaced entry was found")
	}
}
